//! The trace decoder (`cargo bench -p largo-trace`): a shipped recorded
//! program's binary encoding parsed from memory, and its text encoding.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn decode(c: &mut Criterion) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../largo-workloads/traces/lua-build.ltb.gz");
    let trace = largo_trace::read_trace(&path).expect("the shipped lua-build trace");
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(trace.events.len() as u64));
    for (name, binary) in [("lua_build_binary", true), ("lua_build_text", false)] {
        let mut bytes = Vec::new();
        largo_trace::write_to(&mut bytes, &trace, binary).unwrap();
        g.bench_function(name, |b| {
            b.iter(|| largo_trace::parse_bytes(&bytes).unwrap().events.len())
        });
    }
    g.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
