//! General-purpose integer instructions: the arithmetic flags, conditional moves and sets.

use iced_x86::Mnemonic;

use super::{Emu, Flags, mask, sign};

pub(super) fn is_cmov(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Cmovo
            | Cmovno
            | Cmovb
            | Cmovae
            | Cmove
            | Cmovne
            | Cmovbe
            | Cmova
            | Cmovs
            | Cmovns
            | Cmovp
            | Cmovnp
            | Cmovl
            | Cmovge
            | Cmovle
            | Cmovg
    )
}

pub(super) fn is_setcc(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Seto | Setno | Setb | Setae | Sete | Setne | Setbe | Seta | Sets | Setns | Setp | Setnp | Setl | Setge | Setle | Setg
    )
}

impl Emu {
    pub(super) fn logic_flags(&mut self, r: Option<u64>, bytes: u32) {
        self.flags = match r {
            Some(r) => Flags {
                cf: Some(false),
                of: Some(false),
                zf: Some(r & mask(bytes) == 0),
                sf: Some(sign(r, bytes)),
                pf: Some((r as u8).count_ones().is_multiple_of(2)),
            },
            None => Flags::default(),
        };
    }

    pub(super) fn add_flags(&mut self, a: Option<u64>, b: Option<u64>, bytes: u32, sub: bool, keep_cf: bool) -> Option<u64> {
        let cf = self.flags.cf;
        let (Some(a), Some(b)) = (a, b) else {
            self.flags = Flags::default();
            if keep_cf {
                self.flags.cf = cf;
            }
            return None;
        };
        let m = mask(bytes);
        let (a, b) = (a & m, b & m);
        let r = if sub { a.wrapping_sub(b) } else { a.wrapping_add(b) } & m;
        let carry = if sub { a < b } else { (a as u128 + b as u128) > m as u128 };
        let of = if sub {
            sign((a ^ b) & (a ^ r), bytes)
        } else {
            sign((a ^ r) & (b ^ r), bytes)
        };
        self.flags = Flags {
            cf: if keep_cf { cf } else { Some(carry) },
            zf: Some(r == 0),
            sf: Some(sign(r, bytes)),
            of: Some(of),
            pf: Some((r as u8).count_ones().is_multiple_of(2)),
        };
        Some(r)
    }
}
