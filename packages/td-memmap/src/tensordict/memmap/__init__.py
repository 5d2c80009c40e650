from tensordict.memmap._tensor import MemoryMappedTensor
def memmap(*a, **k): pass
