"""placeholder"""
class LazyStackedTensorDictStore:  # replaced below
    pass
