//! Any bytes as a file a program's session wrote for `roofline measure` (region times or
//! counted region points): read back without panicking, or counted as bad.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roofline::__private::TakenRun;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else { return };
    let name = if kind & 1 == 1 { "points-1-2-0.json" } else { "session-1-2-0.json" };
    let mut run = TakenRun::default();
    run.add_file(name, rest);
    run.add_file(name, rest);
    // A file counts as bad or adds what it names, never both.
    assert!(run.bad == 0 || run.bad == 2);
    assert!(run.bad == 0 || (run.times.is_empty() && run.counted.is_empty()));
});
