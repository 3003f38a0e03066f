//! Observations on the wire (protocol.md §8): float data, or PNG (single or concatenated, with
//! an optional compressed channel mapping). Decoding follows mlagents_envs; encoding is what a
//! Unity camera sensor does.

use crate::proto::{observation_proto::FloatData, observation_proto::ObservationData, CompressionTypeProto, ObservationProto};
use crate::spec::{DimensionProperty, ObservationSpec, ObservationType};

/// PNG signature, used to split concatenated PNGs.
const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];

/// Why an observation could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ObservationError {
    #[error("observation has {found} values, its shape {shape:?} needs {expected}")]
    WrongSize { shape: Vec<i32>, expected: usize, found: usize },
    #[error("observation shape {0:?} has a negative or absurd dimension")]
    BadShape(Vec<i32>),
    #[error("observation has no data")]
    NoData,
    #[error("PNG observation could not be decoded: {0}")]
    Png(String),
    #[error("compressed channel mapping {mapping:?} does not fit {channels} decoded channels")]
    BadMapping { mapping: Vec<i32>, channels: usize },
    #[error("unknown compression type {0}")]
    UnknownCompression(i32),
}

/// The spec of an observation as it appears on the wire.
pub fn spec_from_proto(obs: &ObservationProto) -> ObservationSpec {
    let shape: Vec<usize> = obs.shape.iter().map(|d| (*d).max(0) as usize).collect();
    let dimension_properties = if obs.dimension_properties.is_empty() {
        vec![DimensionProperty::Unspecified; shape.len()]
    } else {
        obs.dimension_properties.iter().map(|d| DimensionProperty::from_wire(*d)).collect()
    };
    ObservationSpec {
        shape,
        dimension_properties,
        observation_type: if obs.observation_type == 1 { ObservationType::GoalSignal } else { ObservationType::Default },
        name: obs.name.clone(),
    }
}

fn checked_len(shape: &[i32]) -> Result<usize, ObservationError> {
    shape.iter().try_fold(1usize, |acc, d| {
        if *d < 0 {
            return None;
        }
        acc.checked_mul(*d as usize).filter(|n| *n <= 1 << 30)
    })
    .ok_or_else(|| ObservationError::BadShape(shape.to_vec()))
}

/// Decodes one observation into `prod(shape)` floats, in the row-major order of `shape`.
pub fn decode(obs: &ObservationProto) -> Result<Vec<f32>, ObservationError> {
    let expected = checked_len(&obs.shape)?;
    match CompressionTypeProto::try_from(obs.compression_type) {
        Ok(CompressionTypeProto::None) => match &obs.observation_data {
            Some(ObservationData::FloatData(f)) => {
                if f.data.len() != expected {
                    return Err(ObservationError::WrongSize { shape: obs.shape.clone(), expected, found: f.data.len() });
                }
                Ok(f.data.clone())
            }
            Some(ObservationData::CompressedData(_)) | None => {
                if expected == 0 {
                    Ok(vec![])
                } else {
                    Err(ObservationError::NoData)
                }
            }
        },
        Ok(CompressionTypeProto::Png) => {
            let Some(ObservationData::CompressedData(bytes)) = &obs.observation_data else {
                return Err(ObservationError::NoData);
            };
            decode_png_observation(bytes, obs, expected)
        }
        Err(_) => Err(ObservationError::UnknownCompression(obs.compression_type)),
    }
}

fn decode_png_observation(bytes: &[u8], obs: &ObservationProto, expected: usize) -> Result<Vec<f32>, ObservationError> {
    if obs.shape.len() != 3 {
        return Err(ObservationError::BadShape(obs.shape.clone()));
    }
    let channels_first = obs.dimension_properties == [1, 2, 2];
    let (h, w, c) = if channels_first {
        (obs.shape[1] as usize, obs.shape[2] as usize, obs.shape[0] as usize)
    } else {
        (obs.shape[0] as usize, obs.shape[1] as usize, obs.shape[2] as usize)
    };
    // Decoded planes: one Vec of h*w values per channel.
    let mut planes: Vec<Vec<f32>> = Vec::new();
    for png in split_pngs(bytes) {
        let (ph, pw, pc, pixels) = decode_png(png)?;
        if (ph, pw) != (h, w) {
            return Err(ObservationError::Png(format!("image is {pw}x{ph}, the shape says {w}x{h}")));
        }
        for ch in 0..pc {
            planes.push(pixels.iter().skip(ch).step_by(pc).map(|v| *v as f32 / 255.0).collect());
        }
    }
    let planes = if !obs.compressed_channel_mapping.is_empty() {
        apply_mapping(planes, &obs.compressed_channel_mapping)?
    } else if c == 1 && planes.len() >= 3 {
        // Grayscale without a mapping: mean of the first image's RGB.
        vec![(0..h * w).map(|i| (planes[0][i] + planes[1][i] + planes[2][i]) / 3.0).collect()]
    } else {
        planes.into_iter().take(c).collect()
    };
    if planes.len() != c {
        return Err(ObservationError::WrongSize { shape: obs.shape.clone(), expected, found: planes.len() * h * w });
    }
    let mut out = Vec::with_capacity(expected);
    if channels_first {
        planes.iter().for_each(|p| out.extend_from_slice(p));
    } else {
        for i in 0..h * w {
            out.extend(planes.iter().map(|p| p[i]));
        }
    }
    Ok(out)
}

/// Output channel i = mean of the decoded channels mapped to i; -1 drops a channel.
fn apply_mapping(planes: Vec<Vec<f32>>, mapping: &[i32]) -> Result<Vec<Vec<f32>>, ObservationError> {
    let bad = || ObservationError::BadMapping { mapping: mapping.to_vec(), channels: planes.len() };
    if mapping.len() != planes.len() {
        return Err(bad());
    }
    let max = mapping.iter().copied().max().unwrap_or(-1);
    if max < 0 || mapping.iter().any(|m| *m < -1) {
        return Err(bad());
    }
    let n = planes.first().map_or(0, |p| p.len());
    let mut out = Vec::new();
    for target in 0..=max {
        let sources: Vec<&Vec<f32>> = planes.iter().zip(mapping).filter(|(_, m)| **m == target).map(|(p, _)| p).collect();
        if sources.is_empty() {
            return Err(bad());
        }
        out.push((0..n).map(|i| sources.iter().map(|s| s[i]).sum::<f32>() / sources.len() as f32).collect());
    }
    Ok(out)
}

fn split_pngs(bytes: &[u8]) -> Vec<&[u8]> {
    let mut starts: Vec<usize> = (0..bytes.len().saturating_sub(7)).filter(|i| bytes[*i..].starts_with(&PNG_SIGNATURE)).collect();
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    starts.iter().enumerate().map(|(k, s)| &bytes[*s..*starts.get(k + 1).unwrap_or(&bytes.len())]).collect()
}

/// Decodes one PNG to (height, width, channels, 8-bit interleaved pixels).
fn decode_png(bytes: &[u8]) -> Result<(usize, usize, usize, Vec<u8>), ObservationError> {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(|e| ObservationError::Png(e.to_string()))?;
    let info = reader.info();
    if (info.width as u64) * (info.height as u64) > 1 << 26 {
        return Err(ObservationError::Png(format!("image of {}x{} is too large", info.width, info.height)));
    }
    let mut buf = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut buf).map_err(|e| ObservationError::Png(e.to_string()))?;
    buf.truncate(frame.buffer_size());
    let channels = frame.color_type.samples();
    Ok((frame.height as usize, frame.width as usize, channels, buf))
}

/// Encodes values in [0, 1] of shape `[h, w, c]` (HWC) as PNG bytes the way a Unity camera
/// sensor does: 8-bit RGB images, several concatenated when `c > 3`, with a channel mapping
/// for grayscale or channel counts that are not a multiple of 3. Returns (bytes, mapping).
pub fn encode_png_hwc(data: &[f32], h: usize, w: usize, c: usize) -> (Vec<u8>, Vec<i32>) {
    let mut out = Vec::new();
    let mut mapping = Vec::new();
    let images = if c == 1 { 1 } else { c.div_ceil(3) };
    for img in 0..images {
        let mut pixels = Vec::with_capacity(h * w * 3);
        for i in 0..h * w {
            for k in 0..3 {
                let ch = if c == 1 { 0 } else { img * 3 + k };
                let v = if ch < c { data[i * c + ch] } else { 0.0 };
                pixels.push((v.clamp(0.0, 1.0) * 255.0).round() as u8);
            }
        }
        for k in 0..3 {
            let ch = img * 3 + k;
            mapping.push(if c == 1 { 0 } else if ch < c { ch as i32 } else { -1 });
        }
        let mut encoder = png::Encoder::new(&mut out, w as u32, h as u32);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Fast);
        let mut writer = encoder.write_header().expect("in-memory PNG header");
        writer.write_image_data(&pixels).expect("in-memory PNG data");
    }
    let trivial = c == 3 || (c.is_multiple_of(3) && mapping.iter().enumerate().all(|(i, m)| *m == i as i32));
    (out, if trivial { vec![] } else { mapping })
}

/// Builds a float observation.
pub fn float_observation(spec: &ObservationSpec, data: Vec<f32>) -> ObservationProto {
    ObservationProto {
        shape: spec.shape.iter().map(|d| *d as i32).collect(),
        compression_type: CompressionTypeProto::None as i32,
        observation_data: Some(ObservationData::FloatData(FloatData { data })),
        compressed_channel_mapping: vec![],
        dimension_properties: spec.dimension_properties.iter().map(|d| d.to_wire()).collect(),
        observation_type: if spec.observation_type == ObservationType::GoalSignal { 1 } else { 0 },
        name: spec.name.clone(),
    }
}

/// Builds a PNG observation from HWC floats.
pub fn png_observation(spec: &ObservationSpec, data: &[f32]) -> ObservationProto {
    let (h, w, c) = (spec.shape[0], spec.shape[1], spec.shape[2]);
    let (bytes, mapping) = encode_png_hwc(data, h, w, c);
    ObservationProto {
        compression_type: CompressionTypeProto::Png as i32,
        observation_data: Some(ObservationData::CompressedData(bytes)),
        compressed_channel_mapping: mapping,
        ..float_observation(spec, vec![])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(h: usize, w: usize, c: usize) -> Vec<f32> {
        (0..h * w * c).map(|i| ((i * 37) % 256) as f32 / 255.0).collect()
    }

    #[test]
    fn png_round_trips_for_1_3_and_5_channels() {
        for c in [1, 3, 5, 6] {
            let spec = ObservationSpec::visual_hwc(4, 7, c, "cam");
            let data = image(4, 7, c);
            let obs = png_observation(&spec, &data);
            let back = decode(&obs).unwrap();
            assert_eq!(back.len(), data.len());
            for (a, b) in back.iter().zip(&data) {
                assert!((a - b).abs() < 1.0 / 255.0 + 1e-6, "c={c}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn wrong_sizes_and_garbage_are_errors() {
        let spec = ObservationSpec::vector(3, "v");
        let obs = float_observation(&spec, vec![1.0, 2.0]);
        assert!(matches!(decode(&obs), Err(ObservationError::WrongSize { .. })));
        let mut png = png_observation(&ObservationSpec::visual_hwc(2, 2, 3, "c"), &image(2, 2, 3));
        png.observation_data = Some(ObservationData::CompressedData(vec![0x89, b'P', b'N', b'G', 1, 2, 3]));
        assert!(matches!(decode(&png), Err(ObservationError::Png(_))));
        let mut neg = float_observation(&spec, vec![]);
        neg.shape = vec![-1];
        assert!(matches!(decode(&neg), Err(ObservationError::BadShape(_))));
        let mut huge = float_observation(&spec, vec![]);
        huge.shape = vec![i32::MAX, i32::MAX];
        assert!(matches!(decode(&huge), Err(ObservationError::BadShape(_))));
    }

    #[test]
    fn mapping_averages_and_drops() {
        let planes = vec![vec![0.0, 1.0], vec![1.0, 1.0], vec![0.5, 0.5]];
        let out = apply_mapping(planes.clone(), &[0, 0, -1]).unwrap();
        assert_eq!(out, vec![vec![0.5, 1.0]]);
        assert!(apply_mapping(planes.clone(), &[0, 2, -1]).is_err());
        assert!(apply_mapping(planes, &[0]).is_err());
    }
}
