//! TensorBoard event files, written the way TensorFlow's summary writer writes them: a
//! TFRecord stream (length, masked CRC-32C of the length, payload, masked CRC-32C of the
//! payload) of `Event` protobufs, starting with a `file_version` event. Scalars and
//! histograms, which is what ML-Agents writes.
//!
//! The few message types are declared here with prost (tag numbers from TensorFlow's
//! `event.proto` and `summary.proto`) rather than pulling a TensorBoard crate: the maintained
//! ones depend on an old protobuf runtime.

use prost::Message;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

const CRC32C: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// The checksum TFRecord stores: CRC-32C rotated right by 15 bits plus a constant.
pub fn masked_crc32c(bytes: &[u8]) -> u32 {
    let crc = CRC32C.checksum(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

#[derive(Clone, PartialEq, Message)]
struct Event {
    #[prost(double, tag = "1")]
    wall_time: f64,
    #[prost(int64, tag = "2")]
    step: i64,
    #[prost(oneof = "What", tags = "3, 5")]
    what: Option<What>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum What {
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
}

#[derive(Clone, PartialEq, Message)]
struct Summary {
    #[prost(message, repeated, tag = "1")]
    value: Vec<SummaryValue>,
}

#[derive(Clone, PartialEq, Message)]
struct SummaryValue {
    #[prost(string, tag = "1")]
    tag: String,
    #[prost(oneof = "SummaryKind", tags = "2, 5")]
    kind: Option<SummaryKind>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum SummaryKind {
    #[prost(float, tag = "2")]
    SimpleValue(f32),
    #[prost(message, tag = "5")]
    Histogram(HistogramProto),
}

#[derive(Clone, PartialEq, Message)]
struct HistogramProto {
    #[prost(double, tag = "1")]
    min: f64,
    #[prost(double, tag = "2")]
    max: f64,
    #[prost(double, tag = "3")]
    num: f64,
    #[prost(double, tag = "4")]
    sum: f64,
    #[prost(double, tag = "5")]
    sum_squares: f64,
    #[prost(double, repeated, tag = "6")]
    bucket_limit: Vec<f64>,
    #[prost(double, repeated, tag = "7")]
    bucket: Vec<f64>,
}

/// Writes one event file (`events.out.tfevents.<seconds>.<host>`).
pub struct SummaryWriter {
    path: PathBuf,
    out: BufWriter<File>,
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

impl SummaryWriter {
    /// Creates the folder if needed and a new event file in it.
    pub fn create(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()).unwrap_or_else(|_| "localhost".into());
        let path = dir.join(format!("events.out.tfevents.{}.{host}", now() as u64));
        let mut writer = Self { out: BufWriter::new(File::create(&path)?), path };
        writer.write_event(Event { wall_time: now(), step: 0, what: Some(What::FileVersion("brain.Event:2".into())) })?;
        writer.flush()?;
        Ok(writer)
    }

    /// The event file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_event(&mut self, event: Event) -> std::io::Result<()> {
        let data = event.encode_to_vec();
        let len = (data.len() as u64).to_le_bytes();
        self.out.write_all(&len)?;
        self.out.write_all(&masked_crc32c(&len).to_le_bytes())?;
        self.out.write_all(&data)?;
        self.out.write_all(&masked_crc32c(&data).to_le_bytes())
    }

    fn summary(&mut self, step: i64, tag: &str, kind: SummaryKind) -> std::io::Result<()> {
        let value = SummaryValue { tag: tag.into(), kind: Some(kind) };
        self.write_event(Event { wall_time: now(), step, what: Some(What::Summary(Summary { value: vec![value] })) })
    }

    /// A scalar (`add_scalar`).
    pub fn add_scalar(&mut self, tag: &str, value: f32, step: i64) -> std::io::Result<()> {
        self.summary(step, tag, SummaryKind::SimpleValue(value))
    }

    /// A histogram of values (`add_histogram`), bucketed into 30 equal-width bins.
    pub fn add_histogram(&mut self, tag: &str, values: &[f32], step: i64) -> std::io::Result<()> {
        if values.is_empty() {
            return Ok(());
        }
        let min = values.iter().copied().fold(f32::INFINITY, f32::min) as f64;
        let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let bins = 30usize;
        let width = ((max - min) / bins as f64).max(1e-12);
        let mut bucket = vec![0.0; bins];
        for v in values {
            let i = (((*v as f64 - min) / width) as usize).min(bins - 1);
            bucket[i] += 1.0;
        }
        let bucket_limit = (1..=bins).map(|i| min + width * i as f64).collect();
        let histogram = HistogramProto {
            min,
            max,
            num: values.len() as f64,
            sum: values.iter().map(|v| *v as f64).sum(),
            sum_squares: values.iter().map(|v| (*v as f64).powi(2)).sum(),
            bucket_limit,
            bucket,
        };
        self.summary(step, tag, SummaryKind::Histogram(histogram))
    }

    /// Makes everything written so far readable.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl Drop for SummaryWriter {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // CRC-32C("123456789") = 0xE3069283.
        assert_eq!(CRC32C.checksum(b"123456789"), 0xE306_9283);
        assert_eq!(masked_crc32c(b"123456789"), 0xE306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8));
    }

    #[test]
    fn records_are_framed() {
        let dir = std::env::temp_dir().join(format!("tb-unit-{}", std::process::id()));
        let mut w = SummaryWriter::create(&dir).unwrap();
        w.add_scalar("Environment/Cumulative Reward", 1.5, 12000).unwrap();
        w.flush().unwrap();
        let bytes = std::fs::read(w.path()).unwrap();
        let mut offset = 0;
        let mut events = 0;
        while offset < bytes.len() {
            let len = u64::from_le_bytes(bytes[offset..offset + 8].try_into().unwrap()) as usize;
            assert_eq!(u32::from_le_bytes(bytes[offset + 8..offset + 12].try_into().unwrap()), masked_crc32c(&bytes[offset..offset + 8]));
            let data = &bytes[offset + 12..offset + 12 + len];
            assert_eq!(u32::from_le_bytes(bytes[offset + 12 + len..offset + 16 + len].try_into().unwrap()), masked_crc32c(data));
            Event::decode(data).unwrap();
            offset += 16 + len;
            events += 1;
        }
        assert_eq!(events, 2);
        let _ = std::fs::remove_dir_all(dir);
    }
}
