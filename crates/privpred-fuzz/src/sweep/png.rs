//! Hand-made PNG bytes for the sweep's image-folder cases and the seed corpus.

/// A 2×2 RGB PNG of one grey value, encoded by hand-free means (the `tar` seeds need a
/// decodable image; see `crate_png`).
pub(super) fn crate_png(v: u8) -> Vec<u8> {
    // Pre-encoded 2×2 8-bit greyscale PNG template with the pixel value patched in would need
    // a CRC; encode with flate2 instead.
    let mut raw = Vec::new();
    for _ in 0..2 {
        raw.extend_from_slice(&[0, v, v]);
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, &raw).unwrap();
    let idat = z.finish().unwrap();
    let mut png = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    let mut chunk = |ty: &[u8], data: &[u8]| {
        png.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut c = ty.to_vec();
        c.extend_from_slice(data);
        png.extend_from_slice(&c);
        png.extend_from_slice(&crc32(&c).to_be_bytes());
    };
    chunk(b"IHDR", &[0, 0, 0, 2, 0, 0, 0, 2, 8, 0, 0, 0, 0]);
    chunk(b"IDAT", &idat);
    chunk(b"IEND", &[]);
    png
}

fn crc32(b: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &x in b {
        c ^= x as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// The PNG encoder of the sweep, public for the seed-corpus generator.
pub fn png(v: u8) -> Vec<u8> {
    crate_png(v)
}
