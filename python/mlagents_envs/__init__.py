"""Drop-in for Unity ML-Agents' ``mlagents_envs`` 0.28, backed by the mlagents-rs client.

The module paths, classes, side channels and exceptions are 0.28's; talking to Unity
(launching, the handshake, the exchanges, observation decoding, action encoding) is done
by the Rust extension ``mlagents_envs._native``, with the GIL released while waiting.
"""

__version__ = "0.28.0"
__release_tag__ = "release_19"

#: True in this package; False (absent) in Unity's own.
IS_RUST_BACKEND = True
