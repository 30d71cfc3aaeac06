//! Bounds-checked reading of IE values. Every read returns an error instead of panicking,
//! with the offset inside the value so the caller can report an absolute position.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::{Error, ErrorKind, Result};

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    fn short(&self, n: usize) -> Error {
        let mut e = Error::value(ErrorKind::IeTooShort {
            needed: self.pos + n,
            got: self.buf.len(),
        });
        e.offset = self.pos;
        e
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.remaining() < n {
            return Err(self.short(n));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u24(&mut self) -> Result<u32> {
        let b = self.bytes(3)?;
        Ok(u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }

    pub fn u32(&mut self) -> Result<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u40(&mut self) -> Result<u64> {
        let b = self.bytes(5)?;
        Ok(u64::from_be_bytes([0, 0, 0, b[0], b[1], b[2], b[3], b[4]]))
    }

    pub fn u64(&mut self) -> Result<u64> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    pub fn ipv4(&mut self) -> Result<Ipv4Addr> {
        let b = self.bytes(4)?;
        Ok(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    }

    pub fn ipv6(&mut self) -> Result<Ipv6Addr> {
        let b = self.bytes(16)?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Ok(Ipv6Addr::from(a))
    }

    /// A field preceded by a 2-octet length.
    pub fn len16_bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u16()? as usize;
        self.bytes(n)
    }

    /// A field preceded by a 1-octet length.
    pub fn len8_bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u8()? as usize;
        self.bytes(n)
    }

    /// An error positioned at the current read position.
    pub fn invalid(&self, why: &'static str) -> Error {
        let mut e = Error::value(ErrorKind::Invalid(why));
        e.offset = self.pos;
        e
    }
}

pub(crate) trait Put {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u24(&mut self, v: u32);
    fn put_u32(&mut self, v: u32);
    fn put_u40(&mut self, v: u64);
    fn put_u64(&mut self, v: u64);
    fn put_len16(&mut self, b: &[u8]);
    fn put_len8(&mut self, b: &[u8]);
}

impl Put for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v)
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes())
    }
    fn put_u24(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes()[1..])
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes())
    }
    fn put_u40(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes()[3..])
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes())
    }
    fn put_len16(&mut self, b: &[u8]) {
        self.put_u16(b.len() as u16);
        self.extend_from_slice(b)
    }
    fn put_len8(&mut self, b: &[u8]) {
        self.put_u8(b.len() as u8);
        self.extend_from_slice(b)
    }
}
