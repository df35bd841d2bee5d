//! Where the path goes (conditions, returns, indirect jumps), the stack, and the string
//! instructions (one element, rsi/rdi stepped the way the direction flag says).

use iced_x86::{ConditionCode, Instruction, Mnemonic, OpKind, Register};

use super::Emu;

impl Emu {
    /// Whether the condition of a jcc holds (None: unknown).
    pub(super) fn condition(&self, cc: ConditionCode) -> Option<bool> {
        let f = &self.flags;
        use ConditionCode as C;
        Some(match cc {
            C::o => f.of?,
            C::no => !f.of?,
            C::b => f.cf?,
            C::ae => !f.cf?,
            C::e => f.zf?,
            C::ne => !f.zf?,
            C::be => f.cf? || f.zf?,
            C::a => !f.cf? && !f.zf?,
            C::s => f.sf?,
            C::ns => !f.sf?,
            C::p => f.pf?,
            C::np => !f.pf?,
            C::l => f.sf? != f.of?,
            C::ge => f.sf? == f.of?,
            C::le => f.zf? || f.sf? != f.of?,
            C::g => !f.zf? && f.sf? == f.of?,
            C::None => return None,
        })
    }

    pub(super) fn push(&mut self, v: Option<u64>) {
        let sp = self.regs[4].map(|s| s.wrapping_sub(8));
        self.regs[4] = sp;
        self.write_mem(sp, 8, v);
    }

    pub(super) fn pop(&mut self) -> Option<u64> {
        let sp = self.regs[4];
        let v = match sp {
            Some(s) => self.read_mem(s, 8),
            None => None,
        };
        self.regs[4] = sp.map(|s| s.wrapping_add(8));
        v
    }

    /// Where the block's last instruction `i` (a jcc) goes: Some(true) taken.
    pub fn taken(&self, i: &Instruction) -> Option<bool> {
        self.condition(i.condition_code())
    }

    /// Target of the block's last instruction when it is a return or an indirect jump/call
    /// (evaluated before it executes; a call also pushes its return address).
    pub fn dynamic_target(&mut self, i: &Instruction) -> Option<u64> {
        match i.mnemonic() {
            Mnemonic::Ret => {
                let t = self.pop();
                if i.op_count() == 1 {
                    let n = i.immediate(0);
                    self.regs[4] = self.regs[4].map(|s| s.wrapping_add(n));
                }
                t
            }
            Mnemonic::Jmp | Mnemonic::Call => {
                let t = match i.op0_kind() {
                    OpKind::Register => self.get(i.op0_register()),
                    OpKind::Memory => {
                        let a = self.ea(i)?;
                        self.read_mem(a, 8)
                    }
                    _ => None,
                }?;
                if i.mnemonic() == Mnemonic::Call {
                    self.push(Some(i.next_ip()));
                }
                Some(t)
            }
            _ => None,
        }
    }

    /// `movs`, `stos`, `lods`, `scas` or `cmps` without a repeat prefix: one element, and
    /// rsi/rdi moved by its size the way the direction flag says. False where the emulator
    /// does not model the form (a 32-bit address size, a segment override).
    pub(super) fn string_step(&mut self, i: &Instruction) -> bool {
        use Mnemonic as M;
        let m = i.mnemonic();
        let n: u32 = match m {
            M::Movsb | M::Stosb | M::Lodsb | M::Scasb | M::Cmpsb => 1,
            M::Movsw | M::Stosw | M::Lodsw | M::Scasw | M::Cmpsw => 2,
            M::Movsd | M::Stosd | M::Lodsd | M::Scasd | M::Cmpsd => 4,
            M::Movsq | M::Stosq | M::Lodsq | M::Scasq | M::Cmpsq => 8,
            _ => return false,
        };
        let flat = (0..i.op_count()).all(|o| matches!(i.op_kind(o), OpKind::MemorySegRSI | OpKind::MemoryESRDI | OpKind::Register));
        if !flat || !matches!(i.segment_prefix(), Register::None | Register::DS | Register::ES) {
            return false;
        }
        let step = self.df.map(|down| if down { u64::from(n).wrapping_neg() } else { u64::from(n) });
        let (rsi, rdi) = (self.regs[6], self.regs[7]);
        let acc = match n {
            1 => Register::AL,
            2 => Register::AX,
            4 => Register::EAX,
            _ => Register::RAX,
        };
        let (moves_rsi, moves_rdi) = match m {
            M::Movsb | M::Movsw | M::Movsd | M::Movsq => {
                let v = rsi.and_then(|a| self.read_mem(a, n));
                self.write_mem(rdi, n, v);
                (true, true)
            }
            M::Stosb | M::Stosw | M::Stosd | M::Stosq => {
                let v = self.get(acc);
                self.write_mem(rdi, n, v);
                (false, true)
            }
            M::Lodsb | M::Lodsw | M::Lodsd | M::Lodsq => {
                let v = rsi.and_then(|a| self.read_mem(a, n));
                self.set(acc, v);
                (true, false)
            }
            M::Scasb | M::Scasw | M::Scasd | M::Scasq => {
                let b = rdi.and_then(|a| self.read_mem(a, n));
                self.add_flags(self.get(acc), b, n, true, false);
                (false, true)
            }
            _ => {
                let a = rsi.and_then(|a| self.read_mem(a, n));
                let b = rdi.and_then(|a| self.read_mem(a, n));
                self.add_flags(a, b, n, true, false);
                (true, true)
            }
        };
        if moves_rsi {
            self.regs[6] = rsi.zip(step).map(|(a, d)| a.wrapping_add(d));
        }
        if moves_rdi {
            self.regs[7] = rdi.zip(step).map(|(a, d)| a.wrapping_add(d));
        }
        true
    }

    /// The stack (`push`, `pop`, `leave`) and the direction flag the string instructions step by
    /// (`cld`, `std`). False when `i` is none of these or its form is not modelled (nothing
    /// changed).
    pub(super) fn control_op(&mut self, i: &Instruction, m: Mnemonic, b0: Option<u32>) -> bool {
        use Mnemonic as M;

        match (m, b0) {
            (M::Push, _) if i.op_count() == 1 => {
                let v = match i.op0_kind() {
                    OpKind::Register if i.op0_register().is_gpr64() => self.get(i.op0_register()),
                    OpKind::Memory if i.memory_size().size() == 8 => self.ea(i).and_then(|a| self.read_mem(a, 8)),
                    OpKind::Immediate8to64 | OpKind::Immediate32to64 => Some(i.immediate(0)),
                    _ => return false,
                };
                self.push(v);
            }
            (M::Pop, Some(8)) if i.op0_kind() == OpKind::Register => {
                let v = self.pop();
                self.set(i.op0_register(), v);
            }
            (M::Cld | M::Std, _) => self.df = Some(m == M::Std),
            (M::Leave, _) => {
                self.regs[4] = self.regs[5];
                let v = self.pop();
                self.regs[5] = v;
            }
            _ => return false,
        }
        true
    }
}
