//! `memrel drive`: a model server measured while memrel drives it over its
//! own HTTP API (vLLM's sleep and wake, SGLang's memory release, Ollama's
//! load and unload, or any shape a small TOML file lists). memrel knows when
//! each request was sent and when its answer came, so each phase edge is
//! exact, and what memory still leaves after the answer (the release gap) is
//! measured rather than guessed.
//!
//! It is an attach session (`attach::session`) whose marks come from the
//! driver instead of `memrel mark` or a log: the same sampler, the one edge
//! reader, the same record and outputs. Parts: `cycle` (the requests, the
//! presets), `http` (one request and its answer, errors in words), `server`
//! (which process: started, `--pid`, or the one listening on the port),
//! `driver` (the steps), `rows` (the per-request and per-process rows on
//! disk), `console` (each run's requests as the console shows them), `run`
//! (one drive from typed options: each strategy and repeat a session,
//! `--repeat N` and `--strategy` runs joined into one record by
//! `record::join`).

pub mod console;
pub mod cycle;
pub mod driver;
pub mod http;
pub mod rows;
pub mod run;
pub mod server;
