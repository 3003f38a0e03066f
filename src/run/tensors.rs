//! Named float tensors, as `mlagents-run eval` reads and writes them:
//! `{"<name>": {"shape": [...], "data": [...]}}`. JSON has no NaN or infinities: values are
//! numbers, or the strings `"NaN"`, `"Infinity"` and `"-Infinity"` both ways.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A dense row-major float tensor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorData {
    pub shape: Vec<usize>,
    #[serde(with = "json_floats")]
    pub data: Vec<f32>,
}

impl TensorData {
    /// Checks that `data` holds `prod(shape)` values (a product that overflows never does).
    pub fn validate(&self, name: &str) -> Result<(), super::RunError> {
        self.view().validate(name)
    }

    /// The tensor as a borrowed view.
    pub(crate) fn view(&self) -> TensorView<'_> {
        TensorView { shape: &self.shape, data: &self.data }
    }
}

/// A shape and the values of a tensor held elsewhere: what a run reads, so that an input
/// reshaped on the way (a `.nn` input made rank 4) is not copied for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TensorView<'a> {
    pub shape: &'a [usize],
    pub data: &'a [f32],
}

impl TensorView<'_> {
    /// See [`TensorData::validate`].
    pub(crate) fn validate(&self, name: &str) -> Result<(), super::RunError> {
        let expected = self.shape.iter().try_fold(1usize, |n, d| n.checked_mul(*d));
        if expected != Some(self.data.len()) {
            let needs = expected.map_or_else(|| "more values than fit in memory".to_string(), |n| format!("{n} values"));
            return Err(super::RunError::BadInput {
                name: name.into(),
                detail: format!("shape {:?} needs {needs}, data has {}", self.shape, self.data.len()),
            });
        }
        Ok(())
    }
}

/// Views of tensors by name.
pub(crate) type TensorViews<'a> = BTreeMap<&'a str, TensorView<'a>>;

/// Views of every tensor of `tensors`.
pub(crate) fn views(tensors: &NamedTensors) -> TensorViews<'_> {
    tensors.iter().map(|(name, t)| (name.as_str(), t.view())).collect()
}

/// Tensors by name.
pub type NamedTensors = BTreeMap<String, TensorData>;

/// Reads an `eval` input document, `{"inputs": {"<name>": {"shape": [...], "data": [...]}}}`:
/// a byte-order mark is skipped; unknown fields and a name given twice are errors.
pub fn parse_eval_inputs(text: &str) -> Result<NamedTensors, serde_json::Error> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct EvalFile {
        inputs: UniqueNames,
    }
    /// Tensors by name, refusing a name given twice (JSON objects would keep the last).
    struct UniqueNames(NamedTensors);
    impl<'de> Deserialize<'de> for UniqueNames {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Names;
            impl<'de> serde::de::Visitor<'de> for Names {
                type Value = UniqueNames;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object of named tensors")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<UniqueNames, A::Error> {
                    let mut tensors = NamedTensors::new();
                    while let Some(name) = map.next_key::<String>()? {
                        let tensor: TensorData = map.next_value()?;
                        if tensors.insert(name.clone(), tensor).is_some() {
                            return Err(serde::de::Error::custom(format!("input {name:?} is given twice")));
                        }
                    }
                    Ok(UniqueNames(tensors))
                }
            }
            deserializer.deserialize_map(Names)
        }
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str::<EvalFile>(text).map(|file| file.inputs.0)
}

/// Floats in JSON: numbers, or `"NaN"`, `"Infinity"`, `"-Infinity"` for what JSON cannot hold.
mod json_floats {
    use serde::de::{self, SeqAccess, Visitor};
    use serde::ser::SerializeSeq;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(values: &[f32], serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(values.len()))?;
        for v in values {
            match v {
                v if v.is_nan() => seq.serialize_element("NaN")?,
                v if *v == f32::INFINITY => seq.serialize_element("Infinity")?,
                v if *v == f32::NEG_INFINITY => seq.serialize_element("-Infinity")?,
                v => seq.serialize_element(v)?,
            }
        }
        seq.end()
    }

    /// One element: a number or one of the three names.
    struct Element(f32);

    impl<'de> serde::Deserialize<'de> for Element {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct ElementVisitor;
            impl Visitor<'_> for ElementVisitor {
                type Value = Element;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a number, \"NaN\", \"Infinity\" or \"-Infinity\"")
                }
                /// The nearest float32 (`f32::MAX` as printed, `3.4028235e38`, and its exact
                /// value included); only numbers that round to infinity are refused.
                fn visit_f64<E: de::Error>(self, v: f64) -> Result<Element, E> {
                    let rounded = v as f32;
                    if v.is_finite() && rounded.is_infinite() {
                        return Err(E::custom(format!("{v} is out of the range of a 32-bit float (its largest value is {:e})", f32::MAX)));
                    }
                    Ok(Element(rounded))
                }
                fn visit_i64<E: de::Error>(self, v: i64) -> Result<Element, E> {
                    Ok(Element(v as f32))
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Element, E> {
                    Ok(Element(v as f32))
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Element, E> {
                    match v {
                        "NaN" => Ok(Element(f32::NAN)),
                        "Infinity" => Ok(Element(f32::INFINITY)),
                        "-Infinity" => Ok(Element(f32::NEG_INFINITY)),
                        other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                    }
                }
            }
            deserializer.deserialize_any(ElementVisitor)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f32>, D::Error> {
        struct Values;
        impl<'de> Visitor<'de> for Values {
            type Value = Vec<f32>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of numbers")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f32>, A::Error> {
                // The size hint comes from the input: it bounds nothing, so it sizes nothing.
                let mut values = Vec::new();
                while let Some(Element(v)) = seq.next_element()? {
                    values.push(v);
                }
                Ok(values)
            }
        }
        deserializer.deserialize_seq(Values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_values_travel_as_names() {
        let t = TensorData { shape: vec![4], data: vec![1.5, f32::NAN, f32::INFINITY, f32::NEG_INFINITY] };
        let text = serde_json::to_string(&t).unwrap();
        assert_eq!(text, r#"{"shape":[4],"data":[1.5,"NaN","Infinity","-Infinity"]}"#);
        let back: TensorData = serde_json::from_str(&text).unwrap();
        assert_eq!(back.data[0], 1.5);
        assert!(back.data[1].is_nan() && back.data[2] == f32::INFINITY && back.data[3] == f32::NEG_INFINITY);
        let e = serde_json::from_str::<TensorData>(r#"{"shape":[1],"data":["nan"]}"#).unwrap_err().to_string();
        assert!(e.contains("\"NaN\""), "{e}");
        let e = serde_json::from_str::<TensorData>(r#"{"shape":[1],"data":[1e300]}"#).unwrap_err().to_string();
        assert!(e.contains("32-bit"), "{e}");
    }

    /// The largest float32 as printed (`3.4028235e38`, as Rust and numpy write it) and as
    /// Python's json writes `np.float32` max both read back as `f32::MAX`, so printed outputs
    /// can be fed back; a number past it that rounds to infinity is still refused.
    #[test]
    fn the_largest_float_reads_back_as_printed() {
        let printed = serde_json::to_string(&TensorData { shape: vec![2], data: vec![f32::MAX, f32::MIN] }).unwrap();
        for text in [printed.as_str(), r#"{"shape":[2],"data":[3.4028234663852886e+38,-3.4028235e38]}"#, r#"{"shape":[2],"data":[3.40282356e38,-3.4028235e38]}"#] {
            let back: TensorData = serde_json::from_str(text).unwrap();
            assert_eq!(back.data, vec![f32::MAX, f32::MIN], "{text}");
        }
        let e = serde_json::from_str::<TensorData>(r#"{"shape":[1],"data":[3.4028236e38]}"#).unwrap_err().to_string();
        assert!(e.contains("32-bit"), "{e}");
    }

    #[test]
    fn eval_documents_refuse_duplicates_and_unknown_fields() {
        let one = r#"{"inputs": {"obs_0": {"shape": [1, 2], "data": [1, "NaN"]}}}"#;
        assert_eq!(parse_eval_inputs(one).unwrap()["obs_0"].shape, vec![1, 2]);
        assert!(parse_eval_inputs(&format!("\u{feff}{one}")).is_ok(), "a byte-order mark is skipped");
        let twice = r#"{"inputs": {"obs_0": {"shape": [1], "data": [1]}, "obs_0": {"shape": [1], "data": [2]}}}"#;
        assert!(parse_eval_inputs(twice).unwrap_err().to_string().contains("given twice"));
        let unknown = r#"{"inputs": {"obs_0": {"shape": [1], "data": [1], "dtype": "f32"}}, "seed": 3}"#;
        assert!(parse_eval_inputs(unknown).unwrap_err().to_string().contains("unknown field"));
    }

    #[test]
    fn shapes_whose_product_overflows_never_fit() {
        let t = TensorData { shape: vec![4294967296, 4294967296], data: vec![0.0; 8] };
        let e = t.validate("x").unwrap_err().to_string();
        assert!(e.contains("more values than fit"), "{e}");
    }
}
