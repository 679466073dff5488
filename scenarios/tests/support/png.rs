//! Just enough PNG to judge a screenshot: chunk walk with CRC check, zlib inflate (stored,
//! fixed and dynamic Huffman blocks), and the five scanline filters, for 8-bit RGB and
//! RGBA images (what headless Chromium writes). Written for these tests.

pub struct Image {
    pub width: usize,
    pub height: usize,
    /// RGB per pixel.
    pub pixels: Vec<[u8; 3]>,
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

struct Bits<'a> {
    data: &'a [u8],
    pos: usize,
    bit: u32,
}

impl Bits<'_> {
    fn bit(&mut self) -> Result<u32, String> {
        let byte = *self.data.get(self.pos).ok_or("inflate: out of data")?;
        let b = (u32::from(byte) >> self.bit) & 1;
        self.bit += 1;
        if self.bit == 8 {
            self.bit = 0;
            self.pos += 1;
        }
        Ok(b)
    }
    fn bits(&mut self, n: u32) -> Result<u32, String> {
        let mut v = 0;
        for i in 0..n {
            v |= self.bit()? << i;
        }
        Ok(v)
    }
    fn align(&mut self) {
        if self.bit != 0 {
            self.bit = 0;
            self.pos += 1;
        }
    }
}

/// A canonical Huffman code: counts per length and symbols in code order.
struct Huffman {
    counts: [u16; 16],
    symbols: Vec<u16>,
}

impl Huffman {
    fn new(lengths: &[u8]) -> Huffman {
        let mut counts = [0u16; 16];
        for &l in lengths {
            counts[l as usize] += 1;
        }
        counts[0] = 0;
        let mut offs = [0u16; 16];
        for i in 1..16 {
            offs[i] = offs[i - 1] + counts[i - 1];
        }
        let mut symbols = vec![0u16; lengths.len()];
        for (s, &l) in lengths.iter().enumerate() {
            if l != 0 {
                symbols[offs[l as usize] as usize] = s as u16;
                offs[l as usize] += 1;
            }
        }
        Huffman { counts, symbols }
    }
    fn decode(&self, b: &mut Bits<'_>) -> Result<u16, String> {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for len in 1..16 {
            code |= b.bit()? as i32;
            let count = i32::from(self.counts[len]);
            if code - count < first {
                return self.symbols.get((index + (code - first)) as usize).copied().ok_or("bad code".into());
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        Err("inflate: bad Huffman code".into())
    }
}

const LEN_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195,
    227, 258,
];
const LEN_EXTRA: [u8; 29] =
    [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073,
    4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] =
    [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];

fn inflate(zlib: &[u8]) -> Result<Vec<u8>, String> {
    if zlib.len() < 2 || (u16::from(zlib[0]) << 8 | u16::from(zlib[1])) % 31 != 0 {
        return Err("not a zlib stream".into());
    }
    let mut b = Bits { data: &zlib[2..], pos: 0, bit: 0 };
    let mut out = Vec::new();
    loop {
        let last = b.bit()?;
        match b.bits(2)? {
            0 => {
                b.align();
                let d = b.data;
                let p = b.pos;
                let len =
                    usize::from(*d.get(p).ok_or("short")?) | usize::from(*d.get(p + 1).ok_or("short")?) << 8;
                out.extend_from_slice(d.get(p + 4..p + 4 + len).ok_or("short stored block")?);
                b.pos = p + 4 + len;
            }
            1 => {
                let mut l = [0u8; 288];
                for (i, x) in l.iter_mut().enumerate() {
                    *x = match i {
                        0..=143 => 8,
                        144..=255 => 9,
                        256..=279 => 7,
                        _ => 8,
                    };
                }
                block(&mut b, &mut out, &Huffman::new(&l), &Huffman::new(&[5u8; 30]))?;
            }
            2 => {
                let hlit = b.bits(5)? as usize + 257;
                let hdist = b.bits(5)? as usize + 1;
                let hclen = b.bits(4)? as usize + 4;
                const ORDER: [usize; 19] = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
                let mut cl = [0u8; 19];
                for &o in ORDER.iter().take(hclen) {
                    cl[o] = b.bits(3)? as u8;
                }
                let clh = Huffman::new(&cl);
                let mut lengths = Vec::with_capacity(hlit + hdist);
                while lengths.len() < hlit + hdist {
                    let sym = clh.decode(&mut b)?;
                    match sym {
                        0..=15 => lengths.push(sym as u8),
                        16 => {
                            let prev = *lengths.last().ok_or("repeat with no previous length")?;
                            for _ in 0..3 + b.bits(2)? {
                                lengths.push(prev);
                            }
                        }
                        17 => lengths.extend(std::iter::repeat_n(0, 3 + b.bits(3)? as usize)),
                        _ => lengths.extend(std::iter::repeat_n(0, 11 + b.bits(7)? as usize)),
                    }
                }
                let lit = Huffman::new(&lengths[..hlit]);
                let dist = Huffman::new(&lengths[hlit..hlit + hdist]);
                block(&mut b, &mut out, &lit, &dist)?;
            }
            _ => return Err("inflate: reserved block type".into()),
        }
        if last == 1 {
            return Ok(out);
        }
    }
}

fn block(b: &mut Bits<'_>, out: &mut Vec<u8>, lit: &Huffman, dist: &Huffman) -> Result<(), String> {
    loop {
        let sym = lit.decode(b)? as usize;
        match sym {
            0..=255 => out.push(sym as u8),
            256 => return Ok(()),
            _ => {
                let i = sym - 257;
                let len = *LEN_BASE.get(i).ok_or("bad length")? as usize
                    + b.bits(u32::from(LEN_EXTRA[i]))? as usize;
                let d = dist.decode(b)? as usize;
                let back = *DIST_BASE.get(d).ok_or("bad distance")? as usize
                    + b.bits(u32::from(DIST_EXTRA[d]))? as usize;
                if back > out.len() {
                    return Err("distance too far back".into());
                }
                let start = out.len() - back;
                for k in 0..len {
                    out.push(out[start + k]);
                }
            }
        }
    }
}

/// Decode an 8-bit RGB or RGBA PNG.
pub fn decode(png: &[u8]) -> Result<Image, String> {
    if png.get(..8) != Some(&[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a][..]) {
        return Err("not a PNG".into());
    }
    let mut pos = 8;
    let (mut width, mut height, mut channels) = (0usize, 0usize, 0usize);
    let mut idat = Vec::new();
    while pos + 12 <= png.len() {
        let len = u32::from_be_bytes([png[pos], png[pos + 1], png[pos + 2], png[pos + 3]]) as usize;
        let kind = &png[pos + 4..pos + 8];
        let body = png.get(pos + 8..pos + 8 + len).ok_or("short chunk")?;
        let crc = png.get(pos + 8 + len..pos + 12 + len).ok_or("short chunk")?;
        if crc32(&png[pos + 4..pos + 8 + len]).to_be_bytes() != crc {
            return Err(format!("bad CRC in {}", String::from_utf8_lossy(kind)));
        }
        match kind {
            b"IHDR" => {
                width = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
                height = u32::from_be_bytes([body[4], body[5], body[6], body[7]]) as usize;
                if body[8] != 8 || body[12] != 0 {
                    return Err("only 8-bit, non-interlaced".into());
                }
                channels = match body[9] {
                    2 => 3,
                    6 => 4,
                    t => return Err(format!("colour type {t} not supported")),
                };
            }
            b"IDAT" => idat.extend_from_slice(body),
            b"IEND" => break,
            _ => {}
        }
        pos += 12 + len;
    }
    let raw = inflate(&idat)?;
    let stride = width * channels;
    if raw.len() < height * (stride + 1) {
        return Err("short image data".into());
    }
    let mut prev = vec![0u8; stride];
    let mut pixels = Vec::with_capacity(width * height);
    for y in 0..height {
        let line = &raw[y * (stride + 1)..(y + 1) * (stride + 1)];
        let mut cur = line[1..].to_vec();
        for i in 0..stride {
            let a = if i >= channels { i32::from(cur[i - channels]) } else { 0 };
            let up = i32::from(prev[i]);
            let c = if i >= channels { i32::from(prev[i - channels]) } else { 0 };
            let add = match line[0] {
                0 => 0,
                1 => a,
                2 => up,
                3 => (a + up) / 2,
                4 => {
                    let p = a + up - c;
                    let (pa, pb, pc) = ((p - a).abs(), (p - up).abs(), (p - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        up
                    } else {
                        c
                    }
                }
                f => return Err(format!("bad filter {f}")),
            };
            cur[i] = (i32::from(cur[i]) + add) as u8;
        }
        for px in cur.chunks(channels) {
            pixels.push([px[0], px[1], px[2]]);
        }
        prev = cur;
    }
    Ok(Image { width, height, pixels })
}
