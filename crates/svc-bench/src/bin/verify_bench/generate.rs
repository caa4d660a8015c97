//! The streams of signed commits the benchmark replays: planned, generated on every core, cached on disk.

use super::*;

/// splitmix64's mixing: a bijection of u64, so distinct inputs stay distinct.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fixed pseudo-random sequence, so that every run generates the same frames.
pub(crate) struct Random(u64);

impl Random {
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(1);
        (mix(self.0) % n as u64) as usize
    }
}

/// A repository of the benchmark, by what it is for and its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Repo {
    Family(u32),
    NetworkFamily(u32),
    Poster(u32),
    Memory(u32),
}

impl Repo {
    pub(crate) fn label(self) -> String {
        match self {
            Repo::Family(n) => format!("family/{n}"),
            Repo::NetworkFamily(n) => format!("network-family/{n}"),
            Repo::Poster(n) => format!("poster/{n}"),
            Repo::Memory(n) => format!("memory/{n}"),
        }
    }

    pub(crate) fn number(self) -> u64 {
        let (kind, n) = match self {
            Repo::Family(n) => (1, n),
            Repo::NetworkFamily(n) => (2, n),
            Repo::Poster(n) => (3, n),
            Repo::Memory(n) => (4, n),
        };
        (kind << 32) | u64::from(n)
    }

    /// A did:plc of 24 base32 characters, distinct for each repository.
    pub(crate) fn did(self) -> Did {
        const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
        let (a, b) = (mix(self.number()), mix(!self.number()));
        let bits = (u128::from(a) << 64) | u128::from(b);
        let id: String = (0..24)
            .map(|i| char::from(BASE32[((bits >> (i * 5)) & 31) as usize]))
            .collect();
        Did::new(format!("did:plc:{id}")).expect("a did:plc")
    }

    pub(crate) fn key(self) -> SigningKey {
        SigningKey::from_seed(Curve::K256, self.label().as_bytes())
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Vocab,
    Post,
}

/// One commit to generate: a create in `repo`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planned {
    pub(crate) repo: Repo,
    pub(crate) kind: Kind,
}

pub(crate) fn family_plan(repos: usize, commits: usize) -> Vec<Planned> {
    let mut random = Random(1);
    (0..commits)
        .map(|_| Planned {
            repo: Repo::Family(random.below(repos) as u32),
            kind: Kind::Vocab,
        })
        .collect()
}

/// Mostly posts from a changing crowd of repositories, a family commit every
/// `FAMILY_EVERY` frames and as the very last one (so that the last record queryable means
/// every frame was read).
pub(crate) fn network_plan(repos: usize, frames: usize) -> Vec<Planned> {
    let mut random = Random(2);
    let mut slots: Vec<(u32, u32)> = (0..POSTING_AT_ONCE as u32).map(|n| (n, 0)).collect();
    let mut next_poster = POSTING_AT_ONCE as u32;
    let mut family = 0u32;
    (0..frames)
        .map(|i| {
            if (i + 1) % FAMILY_EVERY == 0 || i + 1 == frames {
                family += 1;
                return Planned {
                    repo: Repo::NetworkFamily((family - 1) % repos as u32),
                    kind: Kind::Vocab,
                };
            }
            let slot = &mut slots[random.below(POSTING_AT_ONCE)];
            if slot.1 == POSTS_PER_REPOSITORY {
                *slot = (next_poster, 0);
                next_poster += 1;
            }
            slot.1 += 1;
            Planned {
                repo: Repo::Poster(slot.0),
                kind: Kind::Post,
            }
        })
        .collect()
}

pub(crate) fn memory_plan(repos: usize) -> Vec<Planned> {
    (0..repos as u32)
        .map(|n| Planned {
            repo: Repo::Memory(n),
            kind: Kind::Vocab,
        })
        .collect()
}

pub(crate) fn text(value: &str) -> Cbor {
    Cbor::Text(value.into())
}

/// The record of commit `i`: a valid family record, or a post.
pub(crate) fn write(kind: Kind, i: usize, rkey: &str) -> Write {
    match kind {
        Kind::Vocab => Write::create(
            "dev.svc.vocab",
            rkey,
            Cbor::Map(vec![
                ("$type".into(), text("dev.svc.vocab")),
                ("name".into(), text(&format!("bench vocabulary {i}"))),
                ("world".into(), text("open")),
                ("occurredAt".into(), text("2026-01-01T00:00:00Z")),
            ]),
        ),
        Kind::Post => Write::create(
            "app.bsky.feed.post",
            rkey,
            Cbor::Map(vec![
                ("$type".into(), text("app.bsky.feed.post")),
                (
                    "text".into(),
                    text(&format!("post number {i}, of no family")),
                ),
                ("langs".into(), Cbor::Array(vec![text("en")])),
                ("createdAt".into(), text("2026-06-01T00:00:00.000Z")),
            ]),
        ),
    }
}

/// Frames in seq order (frame `i` has seq `i + 1`), and every repository's DID and key.
pub(crate) struct Stream {
    pub(crate) frames: Vec<Bytes>,
    pub(crate) keys: Vec<(String, String)>,
}

/// What one generating thread made: frames by index, and its repositories' DIDs and keys.
pub(crate) type Generated = (Vec<(usize, Vec<u8>)>, Vec<(String, String)>);

/// Signs and encodes every planned commit, on `threads` threads, each owning the
/// repositories whose number falls to it. A repository is dropped after its last commit.
pub(crate) fn generate(plan: &[Planned], threads: usize) -> Stream {
    let mut last_use = HashMap::new();
    for (i, planned) in plan.iter().enumerate() {
        last_use.insert(planned.repo, i);
    }
    let owner = |repo: Repo| (mix(repo.number() ^ 0x5eed) % threads as u64) as usize;
    let started = Instant::now();
    let parts: Vec<Generated> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                let last_use = &last_use;
                scope.spawn(move || {
                    let mut repos: HashMap<Repo, Repository> = HashMap::new();
                    let (mut frames, mut keys) = (Vec::new(), Vec::new());
                    for (i, planned) in plan.iter().enumerate() {
                        if thread == 0 && i > 0 && i % (plan.len() / 10).max(1) == 0 {
                            eprintln!(
                                "  generated {}% in {:.0} s",
                                i * 100 / plan.len(),
                                started.elapsed().as_secs_f64()
                            );
                        }
                        if owner(planned.repo) != thread {
                            continue;
                        }
                        let repo = repos.entry(planned.repo).or_insert_with(|| {
                            let repo = Repository::new(planned.repo.did(), planned.repo.key());
                            keys.push((repo.did().to_string(), repo.public().multikey()));
                            repo
                        });
                        let time = UnixMicros(T0 + i as i64 * 1000);
                        let rkey = Tid::from_time(time, 1);
                        let event = repo
                            .commit_at(time, &[write(planned.kind, i, &rkey)])
                            .expect("a create of a new record");
                        frames.push((i, event.frame(i as i64 + 1, time)));
                        if last_use[&planned.repo] == i {
                            repos.remove(&planned.repo);
                        }
                    }
                    (frames, keys)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a generating thread"))
            .collect()
    });
    let mut frames = vec![Bytes::new(); plan.len()];
    let mut keys = Vec::new();
    for (part, part_keys) in parts {
        for (i, frame) in part {
            frames[i] = Bytes::from(frame);
        }
        keys.extend(part_keys);
    }
    Stream { frames, keys }
}

/// The stream cached at `path`, or generated and cached there.
pub(crate) fn stream(path: &FsPath, plan: impl FnOnce() -> Vec<Planned>) -> Stream {
    let started = Instant::now();
    if let Some(stream) = load(path) {
        eprintln!(
            "  {} frames read from {} in {:.1} s",
            stream.frames.len(),
            path.display(),
            started.elapsed().as_secs_f64()
        );
        return stream;
    }
    let plan = plan();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let stream = generate(&plan, threads);
    let bytes: usize = stream.frames.iter().map(Bytes::len).sum();
    eprintln!(
        "  {} frames ({} MB) generated in {:.1} s; kept in {}",
        stream.frames.len(),
        bytes >> 20,
        started.elapsed().as_secs_f64(),
        path.display()
    );
    save(path, &stream);
    stream
}

pub(crate) fn save(path: &FsPath, stream: &Stream) {
    let partial = path.with_extension("partial");
    let file = std::fs::File::create(&partial).expect("create the frame cache");
    let mut out = BufWriter::new(file);
    let mut put = |bytes: &[u8]| {
        out.write_all(&(bytes.len() as u32).to_le_bytes())
            .and_then(|()| out.write_all(bytes))
            .expect("write the frame cache");
    };
    put(&(stream.frames.len() as u64).to_le_bytes());
    for frame in &stream.frames {
        put(frame);
    }
    put(&(stream.keys.len() as u64).to_le_bytes());
    for (did, key) in &stream.keys {
        put(did.as_bytes());
        put(key.as_bytes());
    }
    out.flush().expect("write the frame cache");
    drop(out);
    std::fs::rename(&partial, path).expect("keep the frame cache");
}

pub(crate) fn load(path: &FsPath) -> Option<Stream> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .read_to_end(&mut bytes)
        .ok()?;
    let all = Bytes::from(bytes);
    let mut at = 0usize;
    let mut next = || -> Option<Bytes> {
        let length = u32::from_le_bytes(all.get(at..at + 4)?.try_into().ok()?) as usize;
        let item = all
            .get(at + 4..at + 4 + length)
            .map(|_| all.slice(at + 4..at + 4 + length));
        at += 4 + length;
        item
    };
    let count = |item: Bytes| Some(u64::from_le_bytes(item.as_ref().try_into().ok()?) as usize);
    let frames = (0..count(next()?)?)
        .map(|_| next())
        .collect::<Option<Vec<Bytes>>>()?;
    let keys = (0..count(next()?)?)
        .map(|_| {
            let did = String::from_utf8(next()?.to_vec()).ok()?;
            let key = String::from_utf8(next()?.to_vec()).ok()?;
            Some((did, key))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Stream { frames, keys })
}
