//! Tensors' values in Rust without a libtorch operation. `Vec::try_from(&tensor)` costs a
//! copy kernel (a few µs of dispatch, whatever the size); the networks' small outputs are
//! read after every decision and every minibatch, so a contiguous CPU tensor is read in place.

use tch::kind::Element;
use tch::{Device, Tensor};

/// The memory of a contiguous CPU tensor of `T`s, or None for any other tensor. The slice
/// is valid only while the tensor lives and nothing writes or resizes it.
pub fn contiguous_slice<T: Element>(t: &Tensor) -> Option<*mut [T]> {
    if !t.defined() || t.kind() != T::KIND || t.device() != Device::Cpu || !t.is_contiguous() {
        return None;
    }
    let numel = t.numel();
    if numel == 0 {
        return Some(std::ptr::slice_from_raw_parts_mut(std::ptr::NonNull::<T>::dangling().as_ptr(), 0));
    }
    Some(std::ptr::slice_from_raw_parts_mut(t.data_ptr() as *mut T, numel))
}

/// A tensor's values, flattened row after row, as `T`s (converted when the tensor holds
/// another kind); empty for an undefined tensor.
pub fn values<T: Element + Copy>(t: &Tensor) -> Vec<T> {
    if let Some(slice) = contiguous_slice::<T>(t) {
        // SAFETY: `t` is alive for this read and nothing writes it meanwhile.
        return unsafe { &*slice }.to_vec();
    }
    if !t.defined() {
        return vec![];
    }
    let numel = t.numel();
    let mut out = vec![T::ZERO; numel];
    t.detach().to_device(Device::Cpu).to_kind(T::KIND).contiguous().copy_data(&mut out, numel);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;

    #[test]
    fn values_read_views_conversions_and_empty_tensors() {
        let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).reshape([2, 3]);
        assert_eq!(values::<f32>(&t), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        // A transposed view is not contiguous: read through a copy, in its logical order.
        assert_eq!(values::<f32>(&t.tr()), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        // A narrowed view starts past the storage's first element.
        assert_eq!(values::<f32>(&t.narrow(0, 1, 1)), vec![4.0, 5.0, 6.0]);
        assert_eq!(values::<i64>(&t.to_kind(Kind::Int64)), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(values::<i64>(&t), vec![1, 2, 3, 4, 5, 6]);
        assert!(values::<f32>(&Tensor::zeros([0, 3], (Kind::Float, Device::Cpu))).is_empty());
    }
}
