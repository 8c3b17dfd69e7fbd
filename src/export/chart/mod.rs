//! The PNG charts: one file per chart (timeline, compare, retained, release),
//! the frame they share (frame.rs), their colours (palette.rs), the PNG
//! writer (png.rs) and min/max decimation (decimate.rs). They draw what
//! `metrics` computed; they compute no metric.

pub mod compare;
pub mod decimate;
pub mod frame;
pub mod palette;
pub mod png;
pub mod release;
pub mod retained;
pub mod timeline;
