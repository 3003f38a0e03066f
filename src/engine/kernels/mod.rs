//! The engine's own kernels: the dense-layer tiles (AVX-512 and AVX2/FMA, also the
//! convolutions' gathered products) and the exact element-wise activations as tract ops.

pub mod dense_tiles;
pub mod exact_ops;
