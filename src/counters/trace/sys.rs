//! The few raw system interfaces the tracer needs that `nix` does not wrap: the XSAVE register
//! set, tracee memory through /proc/PID/mem, the auxiliary vector, and starting a traced child.
//! Every unsafe block is small and says why it is sound.

use nix::libc;
use nix::sys::ptrace;
use nix::sys::signal::{self, SigHandler, Signal};
use nix::unistd::Pid;
use std::ffi::CString;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::counters::command::CommandSpec;
use crate::error::{Error, Result};

const NT_X86_XSTATE: libc::c_int = 0x202;

/// Layout of the XSAVE area in the standard (non-compacted) format ptrace uses.
#[derive(Debug, Clone, Copy)]
pub struct XsaveLayout {
    pub size: usize,
    /// Offset of the ymm upper halves (component 2), k0–k7 (5), zmm upper halves (6), zmm16–31 (7).
    pub ymm_hi: usize,
    pub opmask: usize,
    pub zmm_hi: usize,
    pub hi16_zmm: usize,
    /// Offset of the AMX tile configuration (component 17, XTILECFG, 64 bytes); 0 without AMX.
    pub tilecfg: usize,
}

impl XsaveLayout {
    pub fn of_this_cpu() -> XsaveLayout {
        let leaf = |sub: u32| -> (u32, u32, u32) {
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY: CPUID leaf 0xD is read-only and present on every CPU with XSAVE; on
                // others it returns zeros, which we treat as "absent".
                let r = std::arch::x86_64::__cpuid_count(0xd, sub);
                (r.eax, r.ebx, r.ecx)
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = sub;
                (0, 0, 0)
            }
        };
        let (_, _, max) = leaf(0);
        XsaveLayout {
            size: (max as usize).max(4096),
            ymm_hi: leaf(2).1 as usize,
            opmask: leaf(5).1 as usize,
            zmm_hi: leaf(6).1 as usize,
            hi16_zmm: leaf(7).1 as usize,
            tilecfg: leaf(17).1 as usize,
        }
    }

    /// The AMX tile configuration in force, from an XSAVE image (None when the CPU has no
    /// AMX or the image is short). A thread that never configured tiles (or released them)
    /// has the component in its initial state, all zeros: palette 0.
    pub fn tile_config(&self, xs: &[u8]) -> Option<super::classify::TileConfig> {
        if self.tilecfg == 0 {
            return None;
        }
        super::classify::TileConfig::parse(xs.get(self.tilecfg..self.tilecfg + 64)?)
    }

    /// Value of opmask register k`k` from an XSAVE image (None when the CPU has no AVX-512).
    pub fn opmask(&self, xs: &[u8], k: u8) -> Option<u64> {
        if self.opmask == 0 {
            return None;
        }
        let o = self.opmask + 8 * k as usize;
        xs.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }

    /// The 64 bytes of vector register `n` (upper parts zero where the area lacks them).
    pub fn vector(&self, xs: &[u8], n: usize) -> [u8; 64] {
        let mut v = [0u8; 64];
        let mut copy = |dst: usize, src: usize, len: usize| {
            if src != 0
                && let Some(s) = xs.get(src..src + len)
            {
                v[dst..dst + len].copy_from_slice(s);
            }
        };
        if n < 16 {
            copy(0, 160 + 16 * n, 16);
            if self.ymm_hi != 0 {
                copy(16, self.ymm_hi + 16 * n, 16);
            }
            if self.zmm_hi != 0 {
                copy(32, self.zmm_hi + 32 * n, 32);
            }
        } else if self.hi16_zmm != 0 {
            copy(0, self.hi16_zmm + 64 * (n - 16), 64);
        }
        v
    }
}

/// The restartable-sequences area a stopped tracee thread registered with rseq(2): (address,
/// size), None when it has none (yet) or the kernel predates PTRACE_GET_RSEQ_CONFIGURATION
/// (5.13). The kernel rewrites its `cpu_id` fields whenever the thread returns to user space
/// on another CPU, so its contents at a stop say nothing about what the thread reads later.
pub fn rseq_area(pid: Pid) -> Option<(u64, u64)> {
    let mut conf = libc::ptrace_rseq_configuration {
        rseq_abi_pointer: 0,
        rseq_abi_size: 0,
        signature: 0,
        flags: 0,
        pad: 0,
    };
    // SAFETY: PTRACE_GET_RSEQ_CONFIGURATION writes at most `addr` bytes (the size passed) into
    // the struct `data` points to, which lives until after the call; the tracee is stopped
    // (caller's contract).
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GET_RSEQ_CONFIGURATION,
            pid.as_raw(),
            std::mem::size_of::<libc::ptrace_rseq_configuration>() as *mut libc::c_void,
            &mut conf as *mut libc::ptrace_rseq_configuration as *mut libc::c_void,
        )
    };
    (r > 0 && conf.rseq_abi_pointer != 0 && conf.rseq_abi_size > 0).then_some((conf.rseq_abi_pointer, u64::from(conf.rseq_abi_size)))
}

/// The XSAVE image of a stopped tracee thread.
pub fn get_xstate(pid: Pid, size: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; size];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: PTRACE_GETREGSET writes at most iov_len bytes into the buffer iov points to,
    // which lives until after the call; the tracee is stopped (caller's contract).
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            pid.as_raw(),
            NT_X86_XSTATE as usize as *mut libc::c_void,
            &mut iov as *mut libc::iovec as *mut libc::c_void,
        )
    };
    if r < 0 {
        return None;
    }
    buf.truncate(iov.iov_len);
    Some(buf)
}

/// Tracee memory through /proc/PID/mem (reads of whole blocks; writes of breakpoint bytes
/// into read-only text, which /proc/PID/mem allows a tracer).
#[derive(Debug)]
pub struct Memory {
    pid: Pid,
    file: Option<File>,
}

impl Memory {
    pub fn open(pid: Pid) -> Memory {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .ok();
        Memory { pid, file }
    }

    /// Read up to `buf.len()` bytes; returns how many were readable.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> usize {
        if let Some(f) = &self.file {
            let mut done = 0;
            while done < buf.len() {
                match f.read_at(&mut buf[done..], addr + done as u64) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => done += n,
                }
            }
            if done > 0 {
                return done;
            }
        }
        // Fallback: word by word through PTRACE_PEEKDATA.
        let mut done = 0;
        while done < buf.len() {
            let a = addr + done as u64;
            match ptrace::read(self.pid, a as ptrace::AddressType) {
                Ok(w) => {
                    let b = w.to_le_bytes();
                    let n = (buf.len() - done).min(8);
                    buf[done..done + n].copy_from_slice(&b[..n]);
                    done += n;
                }
                Err(_) => break,
            }
        }
        done
    }

    /// A NUL-terminated string of at most 255 bytes at `addr` (a region name), lossily
    /// decoded; `[unreadable name]` where nothing can be read.
    pub fn read_cstr(&self, addr: u64) -> String {
        let mut b = [0u8; 256];
        let n = self.read(addr, &mut b[..255]);
        if n == 0 {
            return "[unreadable name]".to_string();
        }
        let end = b[..n].iter().position(|c| *c == 0).unwrap_or(n);
        String::from_utf8_lossy(&b[..end]).into_owned()
    }

    pub fn read_u64(&self, addr: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        (self.read(addr, &mut b) == 8).then(|| u64::from_le_bytes(b))
    }

    /// Write one byte (a breakpoint or the original byte back).
    pub fn write_byte(&self, addr: u64, byte: u8) -> bool {
        if let Some(f) = &self.file
            && f.write_at(&[byte], addr).ok() == Some(1)
        {
            return true;
        }
        let aligned = addr & !7;
        let Ok(w) = ptrace::read(self.pid, aligned as ptrace::AddressType) else {
            return false;
        };
        let mut b = w.to_le_bytes();
        b[(addr - aligned) as usize] = byte;
        ptrace::write(self.pid, aligned as ptrace::AddressType, i64::from_le_bytes(b)).is_ok()
    }
}

impl Memory {
    /// Write each `(addr, bytes)` in order, into memory the tracee may write itself (the code
    /// cache's areas and table): one `process_vm_writev` for up to `IOV_MAX` of them, where a
    /// stop makes a few dozen (a path's translations, their table entries, stub links). Falls
    /// back to `write` one by one where that call fails or writes less. False where any write
    /// failed.
    pub fn write_many(&self, writes: &[(u64, Vec<u8>)]) -> bool {
        const IOV_MAX: usize = 1024;
        let mut ok = true;
        for chunk in writes.chunks(IOV_MAX) {
            let local: Vec<std::io::IoSlice> = chunk.iter().map(|(_, b)| std::io::IoSlice::new(b)).collect();
            let remote: Vec<nix::sys::uio::RemoteIoVec> = chunk
                .iter()
                .map(|(a, b)| nix::sys::uio::RemoteIoVec {
                    base: *a as usize,
                    len: b.len(),
                })
                .collect();
            let want: usize = chunk.iter().map(|(_, b)| b.len()).sum();
            if nix::sys::uio::process_vm_writev(self.pid, &local, &remote).ok() != Some(want) {
                // (Rewriting what the call did write puts the same bytes in the same order.)
                ok &= chunk.iter().all(|(a, b)| self.write(*a, b));
            }
        }
        ok
    }

    /// Write `bytes` at `addr` (a displaced-execution stub into the tracee's scratch area).
    pub fn write(&self, addr: u64, bytes: &[u8]) -> bool {
        if let Some(f) = &self.file
            && f.write_at(bytes, addr).ok() == Some(bytes.len())
        {
            return true;
        }
        bytes.iter().enumerate().all(|(i, b)| self.write_byte(addr + i as u64, *b))
    }
}

/// Address of a `syscall` instruction (bytes 0f 05) in an executable mapping of `pid`, the
/// vDSO first (the tracer never rewrites it unless a thread runs a block there, and the
/// caller re-checks the bytes before each use).
pub fn find_syscall_insn(pid: Pid, mem: &Memory) -> Option<u64> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let mut ranges: Vec<(u64, u64, bool)> = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        if !perms.contains('x') {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else { continue };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        ranges.push((a, b, line.ends_with("[vdso]")));
    }
    ranges.sort_by_key(|r| !r.2);
    for (a, b, _) in ranges {
        let mut buf = vec![0u8; (b - a).min(1 << 20) as usize];
        let n = mem.read(a, &mut buf);
        if let Some(i) = buf[..n].windows(2).position(|w| w == [0x0f, 0x05]) {
            return Some(a + i as u64);
        }
    }
    None
}

/// Whether system call `nr` may end the calling thread's address space before the tracer sees
/// the thread stop again: `execve` replaces it, `exit`/`exit_group` and a signal sent to
/// itself may end the process (the exit event comes after the space is torn down for a
/// kill). The code cache's counters are read before such a call; any other call leaves the
/// counter areas where they are, to be read at the next marker, exec or exit.
pub fn may_end_the_address_space(nr: u64) -> bool {
    [
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_exit,
        libc::SYS_exit_group,
        libc::SYS_kill,
        libc::SYS_tkill,
        libc::SYS_tgkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
    ]
    .iter()
    .any(|&n| n as u64 == nr)
}

/// A thread stopped by a signal inside a system call that the kernel will restart (rax is
/// -ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND or -ERESTART_RESTARTBLOCK and the signal is
/// suppressed): its registers as they will be when it resumes, at the `syscall` instruction
/// again (rip - 2), with the restart done here so that the tracer may move rip. None when the
/// thread is not in such a call.
pub fn restarted_syscall(regs: &libc::user_regs_struct) -> Option<libc::user_regs_struct> {
    const ERESTARTSYS: i64 = -512;
    const ERESTARTNOINTR: i64 = -513;
    const ERESTARTNOHAND: i64 = -514;
    const ERESTART_RESTARTBLOCK: i64 = -516;
    if (regs.orig_rax as i64) < 0 {
        return None;
    }
    let mut r = *regs;
    match regs.rax as i64 {
        ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND => r.rax = regs.orig_rax,
        ERESTART_RESTARTBLOCK => r.rax = libc::SYS_restart_syscall as u64,
        _ => return None,
    }
    r.rip = regs.rip.wrapping_sub(2);
    r.orig_rax = u64::MAX;
    Some(r)
}

/// What a single-step stop (SIGTRAP after `PTRACE_SINGLESTEP`) says of the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepStop {
    /// The instruction stepped ran: the thread is at the next one.
    Ran,
    /// The instruction stepped is a system call that a signal interrupted while it slept (our
    /// own SIGSTOP included): the kernel reports the step at the call's exit, but the call has
    /// not completed and runs again from rip - 2 when the thread resumes. The registers with
    /// that restart done: the thread is back at its `syscall`, where it was (a displaced copy's
    /// `syscall` stays in its copy), and the same step is to be asked again.
    Interrupted(Box<libc::user_regs_struct>),
}

/// Judge a single-step stop from the thread's registers. Moving rip on from an
/// [`StepStop::Interrupted`] stop as if the call had returned runs the kernel's restart 2 bytes
/// before the new rip: a SIGSEGV inside a scratch area (docs/trace.md, "Code the tracer writes").
pub fn judge_step_stop(regs: &libc::user_regs_struct) -> StepStop {
    match restarted_syscall(regs) {
        Some(r) => StepStop::Interrupted(Box::new(r)),
        None => StepStop::Ran,
    }
}

/// AT_ENTRY of a process from /proc/PID/auxv.
pub fn auxv_entry(pid: Pid) -> Option<u64> {
    let data = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    data.chunks_exact(16).find_map(|c| {
        let key = u64::from_le_bytes(c[..8].try_into().ok()?);
        let val = u64::from_le_bytes(c[8..].try_into().ok()?);
        (key == libc::AT_ENTRY).then_some(val)
    })
}

/// Why ptrace is refused here, as an `Unavailable` error with a hint.
pub fn ptrace_refused(errno: i32) -> Error {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .map(|s| s.trim().to_string());
    let cause = format!(
        "ptrace is not permitted here ({}{})",
        nix::errno::Errno::from_raw(errno).desc(),
        scope
            .as_deref()
            .map(|s| format!(", kernel.yama.ptrace_scope = {s}"))
            .unwrap_or_default()
    );
    Error::unavailable(
        cause,
        "allow it with `sudo sysctl kernel.yama.ptrace_scope=1`, or run the container with --cap-add SYS_PTRACE \
         (and a seccomp profile that permits ptrace); or use --backend perf",
    )
}

/// Fork and exec `cmd` (its program as resolved, its variables added to this process's
/// environment) under PTRACE_TRACEME. Returns the child stopped at its exec SIGTRAP (not yet
/// waited for by the caller: the first wait is done here).
pub fn spawn_traced(cmd: &CommandSpec) -> Result<Pid> {
    let path = &cmd.program;
    let cpath = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| Error::input("command contains a NUL byte", "fix CMD"))?;
    let cargs: Vec<CString> = cmd
        .argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|_| Error::input("an argument contains a NUL byte", "fix ARGS")))
        .collect::<Result<_>>()?;
    // Prepared before the fork: the child must not allocate.
    let cenv = (!cmd.env.is_empty()).then(|| environment_with(&cmd.env)).transpose()?;
    let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| Error::io("pipe", e.into()))?;
    // SAFETY: the child only calls async-signal-safe functions (ptrace, write, execv, _exit)
    // on data prepared before the fork.
    let fork = unsafe { nix::unistd::fork() }.map_err(|e| Error::io("fork", e.into()))?;
    match fork {
        nix::unistd::ForkResult::Child => {
            drop(rd);
            let fail = |tag: u8, e: nix::errno::Errno| -> ! {
                let mut msg = [tag, 0, 0, 0, 0];
                msg[1..].copy_from_slice(&(e as i32).to_le_bytes());
                let _ = nix::unistd::write(&wr, &msg);
                // SAFETY: _exit is async-signal-safe and never returns.
                unsafe { libc::_exit(127) }
            };
            if let Err(e) = ptrace::traceme() {
                fail(b'T', e);
            }
            let exec = match &cenv {
                Some(env) => nix::unistd::execve(&cpath, &cargs, env),
                None => nix::unistd::execv(&cpath, &cargs),
            };
            let e = exec.err().unwrap_or(nix::errno::Errno::ENOEXEC);
            fail(b'E', e)
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(wr);
            let mut msg = [0u8; 5];
            let n = nix::unistd::read(&rd, &mut msg).unwrap_or(0);
            if n == 5 {
                let _ = nix::sys::wait::waitpid(child, None);
                let errno = i32::from_le_bytes(msg[1..].try_into().unwrap_or([0; 4]));
                return Err(if msg[0] == b'T' {
                    ptrace_refused(errno)
                } else {
                    Error::input(
                        format!("{}: cannot execute ({})", path.display(), nix::errno::Errno::from_raw(errno).desc()),
                        "check that CMD is a program for this machine",
                    )
                });
            }
            Ok(child)
        }
    }
}

/// This process's environment with `added` set (replacing a variable of the same name), as
/// `NAME=value` strings for execve.
fn environment_with(added: &[(String, String)]) -> Result<Vec<CString>> {
    use std::os::unix::ffi::OsStrExt;
    let mut vars: Vec<Vec<u8>> = std::env::vars_os()
        .filter(|(k, _)| !added.iter().any(|(a, _)| k.as_bytes() == a.as_bytes()))
        .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
        .collect();
    vars.extend(added.iter().map(|(k, v)| format!("{k}={v}").into_bytes()));
    vars.into_iter()
        .map(|v| CString::new(v).map_err(|_| Error::input("an environment variable contains a NUL byte", "fix its value")))
        .collect()
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catch Ctrl-C (without SA_RESTART, so a blocked waitpid returns EINTR) so the tracer can
/// kill its tracees and leave cleanly.
pub fn catch_interrupt() {
    let act = signal::SigAction::new(SigHandler::Handler(on_sigint), signal::SaFlags::empty(), signal::SigSet::empty());
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    let _ = unsafe { signal::sigaction(Signal::SIGINT, &act) };
    INTERRUPTED.store(false, Ordering::SeqCst);
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Send a signal to one thread; false when it could not be sent (the thread is gone).
pub fn tgkill(tgid: Pid, tid: Pid, sig: Signal) -> bool {
    // SAFETY: a plain syscall with integer arguments.
    unsafe { libc::syscall(libc::SYS_tgkill, tgid.as_raw(), tid.as_raw(), sig as libc::c_int) == 0 }
}

/// How a thread is in the kernel, from the state in /proc/TID/stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sleep {
    /// Running, runnable, stopped by the tracer, or gone.
    Awake,
    /// `S`: in a system call that waits for something (a `futex`, a `read`, a signal).
    Interruptible,
    /// `D`: waiting inside the kernel (disk I/O, a lock, reclaim), which ends on its own; or a
    /// `vfork` parent waiting for its child's `exec`.
    Uninterruptible,
}

/// How thread `tid` is in the kernel (`Sleep::Awake` when it is gone).
pub fn task_sleep(tid: Pid) -> Sleep {
    let Ok(stat) = std::fs::read(format!("/proc/{}/stat", tid.as_raw())) else {
        return Sleep::Awake;
    };
    // "pid (comm) S ...": the command may hold spaces and parentheses, the state follows the last ')'.
    let Some(close) = stat.iter().rposition(|&b| b == b')') else {
        return Sleep::Awake;
    };
    match stat.get(close + 2) {
        Some(b'S') => Sleep::Interruptible,
        Some(b'D') => Sleep::Uninterruptible,
        _ => Sleep::Awake,
    }
}

/// Whether thread `tid` sleeps in the kernel (state `S` or `D` in /proc/TID/stat): in a system
/// call that waits (a `futex`, a `read`), not running and not stopped by the tracer. False when
/// it is gone.
pub fn task_sleeps(tid: Pid) -> bool {
    task_sleep(tid) != Sleep::Awake
}

/// Run one system call in the stopped thread `pid` (at a signal-delivery or single-step stop):
/// registers set for it, `rip` at a `syscall` instruction, one step, registers restored.
/// Returns rax, and every other wait status of `pid` seen meanwhile (signals that arrived
/// before the call ran; an exit), for the caller to handle as if they came later.
pub fn inject_syscall(pid: Pid, at: u64, nr: u64, args: [u64; 6]) -> (Option<u64>, Vec<nix::sys::wait::WaitStatus>) {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let mut seen = Vec::new();
    let Ok(saved) = ptrace::getregs(pid) else { return (None, seen) };
    let mut r = saved;
    r.rax = nr;
    r.orig_rax = u64::MAX;
    r.rdi = args[0];
    r.rsi = args[1];
    r.rdx = args[2];
    r.r10 = args[3];
    r.r8 = args[4];
    r.r9 = args[5];
    r.rip = at;
    if ptrace::setregs(pid, r).is_err() {
        return (None, seen);
    }
    let mut result = None;
    for _ in 0..16 {
        if ptrace::step(pid, None).is_err() {
            return (None, seen);
        }
        match waitpid(pid, Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Stopped(_, Signal::SIGTRAP)) => {
                if let Ok(after) = ptrace::getregs(pid)
                    && after.rip == at + 2
                {
                    result = Some(after.rax);
                    break;
                }
            }
            // A signal that arrived before the call ran: kept for later, the step asked again.
            Ok(st @ WaitStatus::Stopped(..)) => seen.push(st),
            Ok(st @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..))) => {
                seen.push(st);
                return (None, seen);
            }
            Ok(st) => seen.push(st),
            Err(_) => return (None, seen),
        }
    }
    let _ = ptrace::setregs(pid, saved);
    (result, seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_configuration_is_read_at_the_xtilecfg_offset() {
        let layout = XsaveLayout {
            size: 12288,
            ymm_hi: 576,
            opmask: 1088,
            zmm_hi: 1152,
            hi16_zmm: 1664,
            tilecfg: 2752,
        };
        let mut xs = vec![0u8; 12288];
        assert_eq!(layout.tile_config(&xs).map(|c| c.palette), Some(0), "initial state: no palette");
        xs[2752] = 1;
        xs[2752 + 16] = 64;
        xs[2752 + 48] = 16;
        let c = layout.tile_config(&xs).unwrap();
        assert_eq!((c.palette, c.shape(0)), (1, (16, 64)));
        assert!(layout.tile_config(&xs[..2800]).is_none(), "a short image");
        assert!(XsaveLayout { tilecfg: 0, ..layout }.tile_config(&xs).is_none(), "no AMX");
    }
    /// The variables a command adds reach the traced program beside this process's own, one
    /// of the same name replaced; a command adding none gets this process's environment.
    #[test]
    fn a_traced_command_gets_the_variables_it_adds() {
        use nix::sys::wait::{WaitPidFlag, waitpid};
        let environ_of = |env: Vec<(String, String)>| -> Option<Vec<String>> {
            let cmd = CommandSpec {
                env,
                ..CommandSpec::resolve(&["true".to_string()]).unwrap()
            };
            let child = match spawn_traced(&cmd) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("skipping: {e}");
                    return None;
                }
            };
            let _ = waitpid(child, Some(WaitPidFlag::__WALL));
            let environ = std::fs::read(format!("/proc/{child}/environ")).unwrap();
            let _ = signal::kill(child, Signal::SIGKILL);
            let _ = waitpid(child, Some(WaitPidFlag::__WALL));
            Some(
                environ
                    .split(|b| *b == 0)
                    .filter(|v| !v.is_empty())
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .collect(),
            )
        };
        let added = [("ROOFLINE_SPAWN_TEST", "added"), ("PATH", "/replaced")];
        let Some(with) = environ_of(added.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()) else {
            return;
        };
        assert!(with.iter().any(|v| v == "ROOFLINE_SPAWN_TEST=added"), "{with:?}");
        assert_eq!(
            with.iter().filter(|v| v.starts_with("PATH=")).collect::<Vec<_>>(),
            ["PATH=/replaced"]
        );
        let Some(without) = environ_of(Vec::new()) else { return };
        assert!(!without.iter().any(|v| v.starts_with("ROOFLINE_SPAWN_TEST=")), "{without:?}");
        if let Some(path) = std::env::var_os("PATH") {
            let path = format!("PATH={}", path.to_string_lossy());
            assert!(without.contains(&path), "{without:?}");
        }
        if let Some(home) = std::env::var_os("HOME") {
            let home = format!("HOME={}", home.to_string_lossy());
            assert!(with.contains(&home) && without.contains(&home), "{with:?}");
        }
    }

    /// A page holding `syscall; int3` (a displaced copy of a `syscall`, as xol.rs makes them),
    /// mapped before the fork so the traced child has it at the same address.
    fn syscall_copy_page() -> u64 {
        // SAFETY: a fresh private anonymous mapping of one page; nothing else refers to it.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED);
        // SAFETY: the page is ours, writable and 4096 bytes long.
        unsafe { std::ptr::copy_nonoverlapping([0x0fu8, 0x05, 0xcc].as_ptr(), page.cast::<u8>(), 3) };
        page as u64
    }

    /// The crash's sequence, on the real kernel: a thread single-stepped through a displaced
    /// `syscall` sleeps in read(2); our SIGSTOP interrupts it. The step is reported at the
    /// call's exit with the restart pending; judged `Interrupted`, the restart is done in place
    /// and the same step asked again: the call sleeps again, completes when data comes, and
    /// the thread leaves the copy at its `int3`. Moving rip on as the tracer did before (to
    /// code elsewhere, as if the call had returned) makes the kernel restart 2 bytes before
    /// that code: the child dies of SIGSEGV there.
    #[test]
    #[ignore = "ptraces a child of its own: another test of this binary that waits on any child would take its stops; run alone with `cargo test --release --lib -- --ignored a_step_interrupted`"]
    fn a_step_interrupted_inside_a_displaced_syscall_is_restarted_in_place() {
        use nix::sys::wait::{WaitStatus, waitpid};
        for move_on in [false, true] {
            let page = syscall_copy_page();
            let (r, w) = nix::unistd::pipe().unwrap();
            // SAFETY: the child only calls async-signal-safe functions before it stops; from
            // then on the parent drives it through ptrace and kills it.
            let child = match unsafe { nix::unistd::fork() }.unwrap() {
                nix::unistd::ForkResult::Child => {
                    let _ = ptrace::traceme();
                    let _ = signal::raise(Signal::SIGSTOP);
                    // SAFETY: never reached while traced; leaves without running Rust destructors.
                    unsafe { libc::_exit(3) }
                }
                nix::unistd::ForkResult::Parent { child } => child,
            };
            assert!(matches!(waitpid(child, None), Ok(WaitStatus::Stopped(_, Signal::SIGSTOP))));
            let at_stop = ptrace::getregs(child).unwrap();
            let mut regs = at_stop;
            regs.rip = page;
            regs.rax = libc::SYS_read as u64;
            regs.orig_rax = u64::MAX;
            regs.rdi = std::os::fd::AsRawFd::as_raw_fd(&r) as u64;
            regs.rsi = at_stop.rsp - 512;
            regs.rdx = 1;
            ptrace::setregs(child, regs).unwrap();
            ptrace::step(child, None).unwrap();
            // Asleep in the call (not merely on its way there), however loaded the machine.
            let t0 = std::time::Instant::now();
            while !task_sleeps(child) {
                assert!(t0.elapsed().as_secs() < 30, "the child never slept in read(2)");
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            assert!(tgkill(child, child, Signal::SIGSTOP));
            // The step's report comes first, at the call's exit, the restart pending.
            assert!(matches!(waitpid(child, None), Ok(WaitStatus::Stopped(_, Signal::SIGTRAP))));
            let stopped = ptrace::getregs(child).unwrap();
            assert_eq!(stopped.rip, page + 2, "the step is reported at the call's exit");
            let again = match judge_step_stop(&stopped) {
                StepStop::Interrupted(again) => *again,
                StepStop::Ran => panic!("an interrupted read judged complete: {stopped:x?}"),
            };
            assert_eq!((again.rip, again.rax, again.orig_rax), (page, libc::SYS_read as u64, u64::MAX));
            if move_on {
                // The old way: on to "the code after the copy" (here 16 zero bytes further).
                let mut moved = stopped;
                moved.rip = page + 18;
                ptrace::setregs(child, moved).unwrap();
            } else {
                ptrace::setregs(child, again).unwrap();
            }
            ptrace::step(child, None).unwrap();
            // Our SIGSTOP, still pending, stops it before anything runs; suppressed, the step
            // goes on and the call sleeps again until a byte comes.
            assert!(matches!(waitpid(child, None), Ok(WaitStatus::Stopped(_, Signal::SIGSTOP))));
            ptrace::step(child, None).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(30));
            assert_eq!(nix::unistd::write(&w, b"x").unwrap(), 1);
            let end = waitpid(child, None).unwrap();
            let after = ptrace::getregs(child).ok();
            let _ = signal::kill(child, Signal::SIGKILL);
            let _ = waitpid(child, None);
            // SAFETY: the page was mapped above and no one uses it any more.
            unsafe { libc::munmap(page as *mut libc::c_void, 4096) };
            if move_on {
                assert!(
                    matches!(end, WaitStatus::Stopped(_, Signal::SIGSEGV)),
                    "moving rip on with the restart pending runs the restart at rip - 2: {end:?} {after:x?}"
                );
            } else {
                assert!(matches!(end, WaitStatus::Stopped(_, Signal::SIGTRAP)), "{end:?}");
                let after = after.unwrap();
                assert_eq!(
                    (after.rip, after.rax),
                    (page + 2, 1),
                    "the read completed with its byte: {after:x?}"
                );
            }
        }
    }
}
