//! Payload primitives shared by every side channel (C# `IncomingMessage`/`OutgoingMessage`):
//! little-endian bool (1 byte), int32, float32, ASCII string (int32 length + bytes) and float
//! list (int32 count + floats). Readers return a default past the end, as Unity and Python do;
//! [`IncomingMessage::truncated`] tells whether that happened.

/// Builds a side-channel payload.
#[derive(Debug, Default, Clone)]
pub struct OutgoingMessage {
    buffer: Vec<u8>,
}

impl OutgoingMessage {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn write_bool(&mut self, v: bool) -> &mut Self {
        self.buffer.push(v as u8);
        self
    }

    pub fn write_i32(&mut self, v: i32) -> &mut Self {
        self.buffer.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn write_f32(&mut self, v: f32) -> &mut Self {
        self.buffer.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Writes a string as int32 byte length + bytes (ML-Agents uses ASCII).
    pub fn write_string(&mut self, s: &str) -> &mut Self {
        self.write_i32(s.len() as i32);
        self.buffer.extend_from_slice(s.as_bytes());
        self
    }

    pub fn write_f32_list(&mut self, values: &[f32]) -> &mut Self {
        self.write_i32(values.len() as i32);
        for v in values {
            self.write_f32(*v);
        }
        self
    }

    pub fn write_raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.buffer.extend_from_slice(bytes);
        self
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buffer
    }
}

/// Reads a side-channel payload.
#[derive(Debug, Clone)]
pub struct IncomingMessage<'a> {
    buffer: &'a [u8],
    offset: usize,
    truncated: bool,
}

impl<'a> IncomingMessage<'a> {
    pub fn new(buffer: &'a [u8]) -> Self {
        Self { buffer, offset: 0, truncated: false }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buffer.len() - self.offset < n {
            self.truncated = true;
            self.offset = self.buffer.len();
            return None;
        }
        let s = &self.buffer[self.offset..self.offset + n];
        self.offset += n;
        Some(s)
    }

    pub fn read_bool(&mut self) -> bool {
        self.take(1).map(|b| b[0] != 0).unwrap_or(false)
    }

    pub fn read_i32(&mut self) -> i32 {
        self.take(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0)
    }

    pub fn read_f32(&mut self) -> f32 {
        self.take(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0.0)
    }

    pub fn read_string(&mut self) -> String {
        let len = self.read_i32();
        if len < 0 {
            self.truncated = true;
            return String::new();
        }
        self.take(len as usize).map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default()
    }

    pub fn read_f32_list(&mut self) -> Vec<f32> {
        let count = self.read_i32();
        if count < 0 || (count as usize).saturating_mul(4) > self.remaining().len() {
            self.truncated = true;
            self.offset = self.buffer.len();
            return vec![];
        }
        (0..count).map(|_| self.read_f32()).collect()
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> &'a [u8] {
        &self.buffer[self.offset..]
    }

    /// The whole payload.
    pub fn raw(&self) -> &'a [u8] {
        self.buffer
    }

    /// True when a read ran past the end of the payload (the value read was a default).
    pub fn truncated(&self) -> bool {
        self.truncated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_primitive() {
        let mut m = OutgoingMessage::new();
        m.write_bool(true).write_i32(-7).write_f32(2.5).write_string("a/b").write_f32_list(&[1.0, 2.0]);
        let bytes = m.into_bytes();
        let mut r = IncomingMessage::new(&bytes);
        assert!(r.read_bool());
        assert_eq!(r.read_i32(), -7);
        assert_eq!(r.read_f32(), 2.5);
        assert_eq!(r.read_string(), "a/b");
        assert_eq!(r.read_f32_list(), vec![1.0, 2.0]);
        assert!(!r.truncated());
        assert_eq!(r.read_i32(), 0);
        assert!(r.truncated());
    }

    #[test]
    fn absurd_lengths_are_truncation_not_allocation() {
        let bytes = i32::MAX.to_le_bytes();
        assert_eq!(IncomingMessage::new(&bytes).read_f32_list(), Vec::<f32>::new());
        let mut r = IncomingMessage::new(&bytes);
        assert_eq!(r.read_string(), "");
        assert!(r.truncated());
    }
}
