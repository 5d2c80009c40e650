"""TLS: a real redis-server listening with TLS only (a certificate made for the test with
``openssl``), read and written through the store's own transaction code, which uses the
TLS socket directly."""

from __future__ import annotations

import shutil

import pytest
import torch

from tensordict import TensorDict
from tensordict.store import TensorDictStore

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl (the command) is not installed")


def test_reads_and_writes_over_tls(tls_server):
    port, cert = tls_server
    local = TensorDict(obs=torch.randn(500, 8), done=torch.rand(500, 1) > 0.5, step=torch.arange(500), batch_size=[500])
    st = TensorDictStore.from_tensordict(local, host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(cert))
    try:
        idx = torch.randint(500, (200,), generator=torch.Generator().manual_seed(0))
        assert (st[idx] == local[idx]).all()
        st[10:20] = local[:10]
        local[10:20] = local[:10].clone()
        assert (st.to_tensordict() == local).all()
        assert torch.equal(st["obs"], local["obs"])
        other = TensorDictStore.from_store(td_id=st._td_id, host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=str(cert))
        assert torch.equal(other[torch.tensor([15, 3])]["step"], torch.tensor([5, 3]))
    finally:
        st.clear_redis()
        st.close()


def test_tls_without_the_certificate_is_refused(tls_server):
    port, _ = tls_server
    with pytest.raises(ConnectionError, match=rf"127\.0\.0\.1:{port}"):
        TensorDictStore(batch_size=[2], host="127.0.0.1", port=port, ssl=True)
    with pytest.raises(ConnectionError, match=rf"127\.0\.0\.1:{port}"):
        TensorDictStore(batch_size=[2], host="127.0.0.1", port=port)  # plain TCP to a TLS port
