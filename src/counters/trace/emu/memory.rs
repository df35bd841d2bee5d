//! The path's view of memory: what it stored and what it read from the tracee, by 4 KiB page
//! of 8-byte words.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::rc::Rc;

use super::{Emu, mask};

/// Pages of memory (read or stored) a path may hold before the emulator stops tracking
/// memory (a long loop writing an array; 8 MiB of overlay): loads then become unknown, which
/// ends a path only where a branch or an address depends on one.
const MAX_OVERLAY_PAGES: usize = 1 << 10;

/// Eight bytes of the path's view of memory: `present` bytes were stored by the path or read
/// from the tracee, `known` ones have a value (a vector store's bytes are present, unknown).
#[derive(Debug, Clone, Copy, Default)]
struct Word {
    val: u64,
    present: u8,
    known: u8,
}

/// The path's view of memory, by 4 KiB page of words: a lookup in a page used lately is one
/// compare (a hash lookup per word dominated paths through string functions; an interpreter
/// goes between its stack, its frames and its objects' pages all the time).
#[derive(Default)]
pub(super) struct Overlay {
    index: HashMap<u64, usize, BuildHasherDefault<WordHasher>>,
    pages: Vec<Box<[Word; PAGE_WORDS]>>,
    /// (page number + 1, its index in `pages`) of the page used last among those whose number
    /// is the slot's modulo `RECENT`; 0: none.
    recent: [std::cell::Cell<(u64, usize)>; RECENT],
}

const PAGE_WORDS: usize = 512;
/// Pages remembered by `Overlay::recent` (a power of two).
const RECENT: usize = 16;

impl Overlay {
    fn page(&self, page: u64) -> Option<usize> {
        let slot = &self.recent[page as usize % RECENT];
        let (p, i) = slot.get();
        if p == page.wrapping_add(1) {
            return Some(i);
        }
        let i = *self.index.get(&page)?;
        slot.set((page.wrapping_add(1), i));
        Some(i)
    }

    /// The word at index `w` (`address >> 3`), if its page was touched (absent bytes are not
    /// `present`).
    fn get(&self, w: u64) -> Option<&Word> {
        let i = self.page(w / PAGE_WORDS as u64)?;
        Some(&self.pages[i][(w % PAGE_WORDS as u64) as usize])
    }

    /// The index in `pages` of page `page`, added (no byte present) if new.
    fn page_or_add(&mut self, page: u64) -> usize {
        match self.page(page) {
            Some(i) => i,
            None => {
                self.pages.push(Box::new([Word::default(); PAGE_WORDS]));
                let i = self.pages.len() - 1;
                self.index.insert(page, i);
                self.recent[page as usize % RECENT].set((page.wrapping_add(1), i));
                i
            }
        }
    }

    /// The word at index `w` to make (some of) its bytes present.
    fn entry(&mut self, w: u64) -> &mut Word {
        let i = self.page_or_add(w / PAGE_WORDS as u64);
        &mut self.pages[i][(w % PAGE_WORDS as u64) as usize]
    }

    /// The tracee's bytes of page `page` (`bytes` from its start, whole words), where the
    /// path has not stored itself.
    fn fill_page(&mut self, page: u64, bytes: &[u8]) {
        let i = self.page_or_add(page);
        for (w, chunk) in self.pages[i].iter_mut().zip(bytes.chunks_exact(8)) {
            let v = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            if w.present == 0 {
                *w = Word {
                    val: v,
                    present: 0xff,
                    known: 0xff,
                };
            } else if w.present != 0xff {
                // Bytes the path stored stay; the others come from the tracee.
                let keep = byte_mask(w.present);
                w.val = (w.val & keep) | (v & !keep);
                w.known |= !w.present;
                w.present = 0xff;
            }
        }
    }

    /// Bytes `[start, end)` of page `page` present but unknown (memory another agent rewrites).
    fn forget_in_page(&mut self, page: u64, start: u64, end: u64) {
        let base = page * PAGE_WORDS as u64 * 8;
        let (lo, hi) = (start.max(base), end.min(base + PAGE_WORDS as u64 * 8));
        for at in lo..hi {
            let w = self.entry(at >> 3);
            let bit = 1u8 << (at & 7);
            w.present |= bit;
            w.known &= !bit;
        }
    }

    /// Pages held (each 4 KiB of the tracee's address space).
    fn pages(&self) -> usize {
        self.pages.len()
    }
}

/// The bits of a word's bytes that `present` (one bit per byte) names.
fn byte_mask(present: u8) -> u64 {
    BYTE_MASKS[usize::from(present)]
}

/// `byte_mask` for every `present`, computed at compile time.
const BYTE_MASKS: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut p = 0;
    while p < 256 {
        let mut j = 0;
        while j < 8 {
            if p >> j & 1 == 1 {
                t[p] |= 0xff << (8 * j);
            }
            j += 1;
        }
        p += 1;
    }
    t
};

/// A multiplicative hash of a word index (the default SipHash dominated long paths).
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x.wrapping_mul(0x51_7c_c1_b7_27_22_0a_95).rotate_left(26);
    }
}

impl Emu {
    /// Read the tracee's page holding `a` into the overlay where the path has not stored
    /// itself; false when the byte at `a` cannot be read. A whole page per read: a path's
    /// stack slots and the array elements it reads lie near each other, and the system call,
    /// not the copy, is the cost (a path used to read 256 bytes at a time, 16 reads a stop
    /// on a program's start-up).
    fn fill_lines(&mut self, a: u64) -> bool {
        let page = a / (PAGE_WORDS as u64 * 8);
        let base = page * PAGE_WORDS as u64 * 8;
        let cached = self.page_cache.as_ref().and_then(|c| c.borrow().get(&base).cloned());
        let bytes = match cached {
            Some(b) => b,
            None => {
                let mut buf = [0u8; PAGE_WORDS * 8];
                // Mappings are whole pages: the page reads whole or not at all.
                let n = self.mem.read(base, &mut buf);
                self.page_reads += 1;
                let b: Rc<[u8]> = Rc::from(&buf[..n - n % 8]);
                if let Some(c) = &self.page_cache {
                    c.borrow_mut().insert(base, b.clone());
                }
                b
            }
        };
        if bytes.len() <= (a - base) as usize {
            return false;
        }
        self.overlay.fill_page(page, &bytes);
        for &(start, end) in &self.volatile {
            if start < base + bytes.len() as u64 && end > base {
                self.overlay.forget_in_page(page, start, end);
            }
        }
        true
    }

    /// `bytes` (1–8) at `addr` from the overlay alone: Ok(None) when present but not all known,
    /// Err(a) when the byte at `a` is not in the overlay yet. A value spans at most two words
    /// (string functions read unaligned).
    fn overlay_value(&self, addr: u64, bytes: u32) -> Result<Option<u64>, u64> {
        let off = (addr & 7) as u32;
        let lo_n = bytes.min(8 - off);
        let lo_bits = (((1u16 << lo_n) - 1) << off) as u8;
        let lo = match self.overlay.get(addr >> 3) {
            Some(w) if w.present & lo_bits == lo_bits => *w,
            Some(w) => return Err((addr & !7) + u64::from((!w.present & lo_bits).trailing_zeros())),
            None => return Err(addr),
        };
        if lo.known & lo_bits != lo_bits {
            return Ok(None);
        }
        let mut v = lo.val >> (8 * off);
        if lo_n < bytes {
            let hi_n = bytes - lo_n;
            let hi_bits = ((1u16 << hi_n) - 1) as u8;
            let next = (addr | 7).wrapping_add(1);
            let hi = match self.overlay.get(next >> 3) {
                Some(w) if w.present & hi_bits == hi_bits => *w,
                Some(w) => return Err(next + u64::from((!w.present & hi_bits).trailing_zeros())),
                None => return Err(next),
            };
            if hi.known & hi_bits != hi_bits {
                return Ok(None);
            }
            v |= hi.val << (8 * lo_n);
        }
        Ok(Some(v & mask(bytes)))
    }

    pub(super) fn read_mem(&mut self, addr: u64, bytes: u32) -> Option<u64> {
        if self.poisoned || bytes == 0 || bytes > 8 {
            return None;
        }
        // (Each round fills the lines of one missing byte: two at most for two words.)
        for _ in 0..3 {
            match self.overlay_value(addr, bytes) {
                Ok(v) => return v,
                Err(missing) => {
                    if !self.fill_lines(missing) {
                        return None;
                    }
                }
            }
        }
        None
    }

    pub(super) fn write_mem(&mut self, addr: Option<u64>, bytes: u32, v: Option<u64>) {
        if self.poisoned {
            // Nothing will be read from memory any more: what is stored does not matter.
            return;
        }
        let Some(a) = addr else {
            self.poisoned = true;
            return;
        };
        if bytes == 0 || bytes > 64 || self.overlay.pages() > MAX_OVERLAY_PAGES {
            self.poisoned = true;
            return;
        }
        let off = a & 7;
        if off + u64::from(bytes) <= 8 {
            // (One word: the common store, done at once.)
            let bits = (((1u16 << bytes) - 1) << off) as u8;
            let w = self.overlay.entry(a >> 3);
            w.present |= bits;
            match v.filter(|_| bytes <= 8) {
                Some(v) => {
                    let keep = byte_mask(bits);
                    w.known |= bits;
                    w.val = (w.val & !keep) | ((v << (8 * off)) & keep);
                }
                None => w.known &= !bits,
            }
            return;
        }
        for k in 0..u64::from(bytes) {
            let at = a.wrapping_add(k);
            let bit = 1u8 << (at & 7);
            let w = self.overlay.entry(at >> 3);
            w.present |= bit;
            match v.filter(|_| k < 8) {
                Some(v) => {
                    w.known |= bit;
                    let sh = 8 * (at & 7);
                    w.val = (w.val & !(0xff << sh)) | (((v >> (8 * k)) & 0xff) << sh);
                }
                None => w.known &= !bit,
            }
        }
    }

    /// `len` bytes of memory as the path sees them (None if any is unknown).
    pub(super) fn read_bytes(&mut self, a: u64, len: usize) -> Option<[u8; 64]> {
        let mut out = [0u8; 64];
        let mut k = 0;
        while k < len {
            let c = (len - k).min(8);
            let v = self.read_mem(a.wrapping_add(k as u64), c as u32)?;
            out[k..k + c].copy_from_slice(&v.to_le_bytes()[..c]);
            k += c;
        }
        Some(out)
    }

    /// Store `len` bytes (None: their values unknown; an unknown address poisons memory).
    pub(super) fn write_bytes(&mut self, a: Option<u64>, data: Option<[u8; 64]>, len: usize) {
        match (a, data) {
            (Some(a), Some(d)) => {
                let mut k = 0;
                while k < len {
                    let c = (len - k).min(8);
                    let mut b = [0u8; 8];
                    b[..c].copy_from_slice(&d[k..k + c]);
                    self.write_mem(Some(a.wrapping_add(k as u64)), c as u32, Some(u64::from_le_bytes(b)));
                    k += c;
                }
            }
            _ => self.write_mem(a, len as u32, None),
        }
    }
}
