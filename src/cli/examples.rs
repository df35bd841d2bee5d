//! Examples for `roofline help <command>` (clap's `after_help`), one block per subcommand, and
//! for `cargo roofline --help` ([`CARGO_ROOFLINE`]).
//!
//! Each line that starts with `roofline` (after two spaces) is a command a user can paste;
//! `tests/user_docs.rs` runs every one of them, in order, in a scratch directory where
//! `./my-app` is a real Rust program with regions, `perf-stat.csv` a `perf stat` file of a
//! Sapphire Rapids server and `capture.csv` an Nsight Compute capture. A line whose comment
//! says it needs an NVIDIA GPU or a PMU is checked for its clear message where there is none.
//! Keep them quick: small sizes, `--quick` where a command has it.

pub const MACHINE: &str = "\
Examples:
  roofline machine                                   # this machine: CPU, caches, measured clocks, peaks
  roofline machine --json -o machine.json            # the same as a roofline.machine/1 document
  roofline machine --platform spr --no-measure       # a Sapphire Rapids' peaks, from the table alone";

pub const KERNELS: &str = "\
Examples:
  roofline kernels                                   # the suite, the variants this CPU runs, W and Q per call
  roofline kernels --all-formulas                    # every variant's formulas";

pub const RUN: &str = "\
Examples:
  roofline run triad --bytes 1MiB                    # W and Q from the formulas, T measured
  roofline run dgemm --size 128 --backend trace      # W and Q counted by tracing the calls
  roofline run triad --bytes 64MiB --threads 1,2 -o triad.json";

pub const SWEEP: &str = "\
Examples:
  roofline sweep triad --from 16KiB --to 64MiB --factor 2      # where each cache level ends
  roofline sweep dot --from 4KiB --to 8MiB --no-ceilings --json -o dot-sweep.json";

pub const CEILINGS: &str = "\
Examples:
  roofline ceilings --quick                          # 10-20 s; cached in ~/.cache/roofline/
  roofline ceilings --quick --json -o ceilings.json  # the cached figures, as a file";

pub const MEASURE: &str = "\
Examples:
  roofline measure -- ./my-app                       # perf where a PMU exists, else the trace backend
  roofline measure --backend trace --by-function -o app.json -- ./my-app   # W by function and line
  roofline measure --backend trace --trace memory --repeat 3 -- ./my-app   # Q per cache level, 3 timed runs

An MPI job: under the launcher, `-o DIR/` writes one file per rank (DIR/HOST-rRANK.json), e.g.
  mpirun -np 4 roofline measure -o job/ -- ./my-app    (or srun, mpiexec.hydra; docs/mpi.md)
and `roofline report merge job/ -o job.json` makes ranks, nodes and the job of them.";

pub const EVENTS: &str = "\
Examples:
  roofline events                                    # the perf stat line for this CPU
  roofline events --platform spr -- ./my-app         # for a Sapphire Rapids server, around your program";

pub const IMPORT: &str = "\
Examples:
  roofline import perf-stat perf-stat.csv --platform spr                # the file `perf stat -x, -o` wrote
  roofline import perf-stat perf-stat.csv --platform spr --name my-app -o my-app.json";

pub const VALIDATE: &str = "\
Examples:
  roofline validate --kernels triad,dot              # the trace backend against the formulas
  roofline validate --backend simulated --kernels triad   # the simulated PMU (a test instrument)
  roofline validate --backend perf --kernels triad   # this machine's counters (needs a PMU)";

pub const DOCTOR: &str = "\
Examples:
  roofline doctor                                    # what this machine can measure, and the fix for what not
  roofline doctor --json";

pub const PLOT: &str = "\
Examples:
  roofline run triad --bytes 1MiB -o triad.json      # a report to draw
  roofline plot triad.json -o triad.html             # cache-aware, classic and hierarchical charts
  roofline plot triad.json --kind carm -o triad.png";

pub const REPORT: &str = "\
Examples:
  roofline run triad --bytes 1MiB -o a.json
  roofline run dot --bytes 1MiB -o b.json
  roofline report show a.json                        # the terminal summary: roofs, bound, advice
  roofline report merge a.json b.json -o both.json   # one report (runs, nodes, ranks)
  roofline report show both.json -o both.csv";

pub const PROFILE: &str = "\
Examples:
  roofline profile --kernels triad,dgemm -o quick-look   # two of the suite's kernels (all: no --kernels)
  roofline profile --from quick-look/report.json -o again   # re-render a report, nothing measured";

pub const GATE: &str = "\
Examples:
  roofline gate --baseline baseline.json --update-baseline --backend trace -- ./my-app   # once: the baseline
  roofline gate --baseline baseline.json --backend trace -- ./my-app     # in CI: exact W, Q within 1 %
  roofline measure --backend trace --repeat 5 -o current.json -- ./my-app
  roofline gate --baseline baseline.json --current current.json --format junit -o gate.xml";

pub const GPU: &str = "\
Examples:
  roofline gpu machine                               # needs an NVIDIA GPU
  roofline gpu ceilings --quick                      # needs an NVIDIA GPU
  roofline gpu run dgemm --size 4096                 # needs an NVIDIA GPU
  roofline gpu measure -o train.json -- python3 train.py   # needs an NVIDIA GPU (and Nsight Compute)
  roofline gpu import capture.csv --gpu h100-sxm -o gpu.json   # an `ncu --csv` capture: no GPU needed";

pub const COMPARE: &str = "\
Examples:
  roofline run dgemm --size 256 -o cpu.json
  roofline gpu import capture.csv --gpu h100-sxm -o gpu.json
  roofline compare cpu.json gpu.json -o compare.html  # both machines' roofs, speedup per kernel";

/// `cargo roofline --help`. `tests/cargo_roofline.rs` runs every line in a generated crate
/// `my-app` (a binary, an example `dot` and a bench `dot`, each taking an element count).
pub const CARGO_ROOFLINE: &str = "\
Examples:
  cargo roofline                                     # the package's only binary; roofline-my-app.html here
  cargo roofline --bin my-app -o my-app.json -- 20000   # a binary with its arguments; the report as JSON
  cargo roofline --example dot --backend trace -o dot.html   # an example, W and Q counted by tracing
  cargo roofline --bench dot -o bench.svg            # a bench, run with --bench as `cargo bench` runs it";
