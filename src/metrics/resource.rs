//! What each resource is, for the metrics and everything above them: which
//! resources a record measured (the host always, its CUDA devices, the
//! container and the model files' page cache where the header names them,
//! and every catalogued resource (`sampler::resources`: `shm`, …) that
//! moved), their names and labels, their budget keys, whether the gate
//! judges them, their reading in a sample or at an edge, and how they are
//! shown ([`Look`]: panel, series and parts, names, context), so that no
//! exporter matches on which resource it draws. A catalogued resource's
//! facts come from its catalogue entry (`ResourceDef` and its `Shape`).
//!
//! The key itself (`record::Resource`) and the bytes (`record::Readings`,
//! one map per sample and per edge) live on the record's floor; this trait
//! adds what a resource means. Every metric, chart panel, table column and
//! gate verdict is written once and applied to each resource.

pub use crate::record::Resource;
use crate::record::{Event, Header, Part, Record, Sample};
use crate::sampler::resources::{ResourceDef, CATALOGUE};

/// How far a catalogued resource must move during a record to be one of its
/// resources: less is the machine's own noise (a semaphore file of 4 KiB),
/// not something the measured program did.
pub const MOVED_BYTES: u64 = 1 << 20;

/// What a resource is (its names, budget keys, whether the gate judges it)
/// and where its bytes are in a record: the metrics floor's knowledge of
/// the record's `Resource` keys.
pub trait ResourceFacts: Sized {
    /// The resources a record measured: the host always, its CUDA device,
    /// and the container where the record names a cgroup (even one it could
    /// not read: its columns then say why).
    /// and the model files' page cache where the weights files were known.
    /// A record holds one device's readings per run (a worker uses one device);
    /// the names carry the device so records of several devices stay apart.
    fn of(header: &Header) -> Vec<Resource>;

    /// The resources a record measured: the host, its header's device, each
    /// run's own device (runs spread over GPUs) and every GPU a run's samples
    /// read per GPU (a machine of several), in order.
    fn of_record(record: &Record) -> Vec<Resource>;

    /// Every resource of the catalogue, in its order.
    fn probed() -> impl Iterator<Item = Resource>;

    /// The catalogue's entry of a catalogued resource.
    fn def(self) -> Option<&'static ResourceDef>;

    /// The lowest and highest reading in `record` (`None`: never read).
    /// A catalogued resource is one of the record's where they are
    /// [`MOVED_BYTES`] or more apart; else it stayed still (`Summary::still`).
    fn range_in(self, record: &Record) -> Option<(u64, u64)>;

    /// What the numbers are, for column headers: `RSS`, `VRAM`, `cgroup WS` or `cached`.
    fn quantity(self) -> &'static str;

    /// For people: `host RSS`, `VRAM cuda:0`, `container working set (whole cgroup)` or `page cache`.
    fn label(self) -> String;

    /// Whether the gate judges it: not the container, whose cgroup holds
    /// other processes than the worker (memrel itself, at least) and whose
    /// page cache moves with the whole machine's memory pressure.
    fn is_gated(&self) -> bool;

    /// The word `[thresholds]` keys put after the metric's (`vram` in
    /// `max_retained_vram_mib`); `""` for host memory, `None` where nothing
    /// is budgeted (the container).
    fn budget_infix(self) -> Option<String>;

    /// The resources whose budgets are one set (every device shares the
    /// `vram` keys): `Device(0)` stands for any device.
    fn budget_class(self) -> Resource;

    /// Whether it is the machine's, not the measured process's: the page
    /// cache and the catalogued resources (charts draw them as context).
    fn is_machine_wide(&self) -> bool;

    /// This resource in one sample (`None`: not read at that instant).
    fn in_sample(self, sample: &Sample) -> Option<u64>;

    /// This resource at a phase edge (`None`: not read there).
    fn at_event(self, event: &Event) -> Option<u64>;

    /// The anonymous part at a phase edge, where the resource has parts
    /// (host memory; the container, where its edges read memory.stat).
    fn anon_at_event(self, event: &Event) -> Option<u64>;

    /// How charts, the trace and tables show it ([`Look`]): what exporters
    /// ask instead of matching on which resource it is.
    fn look(self) -> Look;
}

/// How a chart draws a resource's series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draw {
    /// Its parts stacked from zero (host memory: anon filled, file the band
    /// up to the whole), the whole a line over them; an unread part is 0.
    Stacked,
    /// The whole filled down to zero under its line, its floor dashed.
    Area,
    /// The whole a strong line, its parts lighter lines; the first part is
    /// its ceiling (the container's usage, page cache included, above its
    /// working set). Where a lane is too low for lines (`compare.png`), an
    /// `Area`.
    Lines,
}

/// One part a chart draws with its resource, and its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartLook {
    pub part: Part,
    /// In a timeline's legend: `RssAnon (tensors, heap)`.
    pub legend: &'static str,
    /// In `compare.png`'s key, where its resource is `Stacked`.
    pub key: &'static str,
    /// Its counter track in trace.json: `anon`.
    pub track: &'static str,
}

/// How a resource is shown, from its facts: its panel, its series and
/// parts, their names, and whether it is context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    pub draw: Draw,
    /// Its whole's name in a chart's legend and key: `RSS total`,
    /// `VRAM cuda:0`, `page cache (model files)`.
    pub name: String,
    /// Its name is followed by how VRAM was read (`process` or `process
    /// tree`, `sampler::vram_scope`).
    pub scoped: bool,
    /// Its whole's counter track in trace.json: `rss`, `vram cuda:0`.
    pub track: String,
    /// Its parts drawn with it, in the order `draw` says.
    pub parts: Vec<PartLook>,
    /// The measured process's own memory (host RSS): a timeline's tall
    /// panel, its baseline plainly `baseline` when alone, `compare.png`'s
    /// word `memory`, the fields of its anonymous part.
    pub primary: bool,
    /// A cache kept by design (the page cache): its story is what stays
    /// cached after the unload (its columns and lanes say that, and its
    /// words are `keeps cached`), not what is retained, and a first load
    /// filling it is no one-time cost to explain.
    pub cache: bool,
    /// Its baseline's label is drawn on the chart, not only in the legend
    /// (a device's, whose floor sits near it).
    pub baseline_on_chart: bool,
    /// Its group's heading in a slim table: `container WS`.
    pub slim_label: String,
}

/// Host memory's parts.
const HOST_PARTS: &[PartLook] = &[
    PartLook {
        part: Part::Anon,
        legend: "RssAnon (tensors, heap)",
        key: "RssAnon (heap, copied tensors)",
        track: "anon",
    },
    PartLook {
        part: Part::File,
        legend: "RssFile (mapped files)",
        key: "RssFile (mapped files)",
        track: "file",
    },
];

/// The container's usage, drawn as a line above its working set.
const CONTAINER_PARTS: &[PartLook] = &[PartLook {
    part: Part::Usage,
    legend: "cgroup usage (page cache included)",
    key: "cgroup usage (page cache included)",
    track: "container usage",
}];

impl ResourceFacts for Resource {
    /// The resources a record measured: the host always, its CUDA device,
    /// and the container where the record names a cgroup (even one it could
    /// not read: its columns then say why).
    /// and the model files' page cache where the weights files were known.
    /// A record holds one device's readings per run (a worker uses one device);
    /// the names carry the device so records of several devices stay apart.
    fn of(header: &Header) -> Vec<Resource> {
        let mut out = vec![Resource::Host];
        if let Some(device) = Resource::device_of(&header.device) {
            out.push(device);
        }
        if header.page_cache.is_some() {
            out.push(Resource::PageCache);
        }
        if header.container.is_some() {
            out.push(Resource::Container);
        }
        out
    }

    /// The resources a record measured: the host, its header's device, each
    /// run's own device (runs spread over GPUs) and every GPU a run's samples
    /// read per GPU (a machine of several), in order.
    fn of_record(record: &Record) -> Vec<Resource> {
        let of_header = Resource::of(&record.header);
        let mut devices: Vec<Resource> = of_header
            .iter()
            .copied()
            .filter(|r| r.is_device())
            .collect();
        for run in &record.runs {
            let own = run.meta.device.as_deref().and_then(Resource::device_of);
            let per_gpu = run
                .samples
                .iter()
                .filter(|s| s.readings.per_gpu())
                .flat_map(|s| s.readings.gpus().map(|(gpu, _)| Resource::Device(gpu)));
            for r in own.into_iter().chain(per_gpu) {
                if !devices.contains(&r) {
                    devices.push(r);
                }
            }
        }
        devices.sort();
        let mut out = vec![Resource::Host];
        out.extend(devices);
        out.extend(
            of_header
                .into_iter()
                .filter(|r| *r != Resource::Host && !r.is_device()),
        );
        out.extend(catalogued_in(record).into_iter().filter(|r| {
            r.range_in(record)
                .is_some_and(|(low, high)| high - low >= MOVED_BYTES)
        }));
        out
    }

    /// Every resource of the catalogue, in its order.
    fn probed() -> impl Iterator<Item = Resource> {
        CATALOGUE.iter().filter_map(|d| d.resource())
    }

    /// The catalogue's entry of a catalogued resource.
    fn def(self) -> Option<&'static ResourceDef> {
        match self {
            Resource::Probed(key) | Resource::ProbedGpu(key, _) => {
                crate::sampler::resources::find(key.as_str())
            }
            _ => None,
        }
    }

    /// The lowest and highest reading in `record` (`None`: never read).
    /// A catalogued resource is one of the record's where they are
    /// [`MOVED_BYTES`] or more apart; else it stayed still (`Summary::still`).
    fn range_in(self, record: &Record) -> Option<(u64, u64)> {
        values_in(self, record).fold(None, |range, v| match range {
            None => Some((v, v)),
            Some((lo, hi)) => Some((v.min(lo), v.max(hi))),
        })
    }

    /// What the numbers are, for column headers: `RSS`, `VRAM`, `cgroup WS` or `cached`.
    fn quantity(self) -> &'static str {
        match self {
            Resource::Host => "RSS",
            Resource::Device(_) => "VRAM",
            Resource::Container => "cgroup WS",
            Resource::PageCache => "cached",
            Resource::Probed(_) | Resource::ProbedGpu(..) => self.def().map_or("?", |d| d.quantity),
        }
    }

    /// For people: `host RSS`, `VRAM cuda:0`, `container working set (whole cgroup)` or `page cache`.
    fn label(self) -> String {
        match self {
            Resource::Host => "host RSS".to_string(),
            Resource::Device(n) => format!("VRAM cuda:{n}"),
            Resource::Container => "container working set (whole cgroup)".to_string(),
            Resource::PageCache => "page cache".to_string(),
            Resource::Probed(_) => self.def().map_or("?", |d| d.label).to_string(),
            Resource::ProbedGpu(_, n) => {
                format!("{} cuda:{n}", self.def().map_or("?", |d| d.label))
            }
        }
    }

    /// Whether the gate judges it: not the container, whose cgroup holds
    /// other processes than the worker (memrel itself, at least) and whose
    /// page cache moves with the whole machine's memory pressure.
    fn is_gated(&self) -> bool {
        !matches!(self, Resource::Container)
    }

    /// The word `[thresholds]` keys put after the metric's (`vram` in
    /// `max_retained_vram_mib`); `""` for host memory, `None` where nothing
    /// is budgeted (the container).
    fn budget_infix(self) -> Option<String> {
        match self {
            Resource::Host => Some(String::new()),
            Resource::Device(_) => Some("vram".to_string()),
            Resource::Container => None,
            Resource::PageCache => Some(self.key()),
            Resource::Probed(key) | Resource::ProbedGpu(key, _) => Some(key.as_str().to_string()),
        }
    }

    /// The resources whose budgets are one set (every device shares the
    /// `vram` keys): `Device(0)` stands for any device.
    fn budget_class(self) -> Resource {
        match self {
            Resource::Device(_) => Resource::Device(0),
            Resource::ProbedGpu(key, _) => Resource::ProbedGpu(key, 0),
            other => other,
        }
    }

    /// Whether it is the machine's, not the measured process's: the page
    /// cache and the catalogued resources (charts draw them as context).
    fn is_machine_wide(&self) -> bool {
        match self {
            Resource::PageCache => true,
            _ => self.def().is_some_and(|d| d.shape.context),
        }
    }

    /// This resource in one sample (`None`: not read at that instant).
    fn in_sample(self, sample: &Sample) -> Option<u64> {
        sample.readings.at(self)
    }

    fn at_event(self, event: &Event) -> Option<u64> {
        event.readings.at(self)
    }

    /// The anonymous part at a phase edge, where the resource has parts
    /// (host memory; the container, where its edges read memory.stat).
    fn anon_at_event(self, event: &Event) -> Option<u64> {
        event.readings.part(self, Part::Anon)
    }

    fn look(self) -> Look {
        let plain = Look {
            draw: Draw::Area,
            name: self.label(),
            scoped: false,
            track: self.label(),
            parts: Vec::new(),
            primary: false,
            cache: false,
            baseline_on_chart: false,
            slim_label: self.label(),
        };
        match self {
            Resource::Host => Look {
                draw: Draw::Stacked,
                name: "RSS total".to_string(),
                track: "rss".to_string(),
                parts: HOST_PARTS.to_vec(),
                primary: true,
                ..plain
            },
            Resource::Device(_) => Look {
                scoped: true,
                track: format!("vram {}", self.key()),
                baseline_on_chart: true,
                ..plain
            },
            Resource::Container => Look {
                draw: Draw::Lines,
                track: "container working set".to_string(),
                parts: CONTAINER_PARTS.to_vec(),
                slim_label: "container WS".to_string(),
                ..plain
            },
            Resource::PageCache => Look {
                name: "page cache (model files)".to_string(),
                track: "page cache".to_string(),
                cache: true,
                ..plain
            },
            Resource::Probed(_) | Resource::ProbedGpu(..) => {
                let parts = self.def().map_or(&[][..], |d| d.shape.parts);
                if parts.is_empty() {
                    plain
                } else {
                    Look {
                        draw: Draw::Stacked,
                        parts: catalogued_parts(parts),
                        ..plain
                    }
                }
            }
        }
    }
}

/// A catalogued resource's parts as a chart draws them: each part's one
/// name serves its legend, its key and its trace track.
fn catalogued_parts(parts: &'static [(Part, &'static str)]) -> Vec<PartLook> {
    parts
        .iter()
        .map(|&(part, name)| PartLook {
            part,
            legend: name,
            key: name,
            track: name,
        })
        .collect()
}

/// The catalogued resources a record may hold, in the catalogue's order: a
/// resource read per GPU once for each GPU its readings name.
fn catalogued_in(record: &Record) -> Vec<Resource> {
    let mut out = Vec::new();
    for def in crate::sampler::resources::CATALOGUE {
        let Some(resource) = def.resource() else {
            continue;
        };
        if !def.shape.per_gpu {
            out.push(resource);
            continue;
        }
        let mut gpus: Vec<Resource> = record
            .runs
            .iter()
            .flat_map(|run| {
                let samples = run.samples.iter().map(|s| &s.readings);
                samples.chain(run.events.iter().map(|e| &e.readings))
            })
            .flat_map(|r| r.resources())
            .filter(|r| r.catalogue_key() == resource.catalogue_key())
            .collect();
        gpus.sort();
        gpus.dedup();
        out.extend(gpus);
    }
    out
}

/// Every reading of this resource in `record`: its samples and edges, over all runs.
fn values_in(this: Resource, record: &Record) -> impl Iterator<Item = u64> + '_ {
    record.runs.iter().flat_map(move |run| {
        let samples = run.samples.iter().filter_map(move |s| this.in_sample(s));
        samples.chain(run.events.iter().filter_map(move |e| this.at_event(e)))
    })
}
