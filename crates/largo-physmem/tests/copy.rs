//! The copy engines on the ram backing: every destination holds exactly
//! its source's bytes, whatever the policy, thread count and folio sizes.

use largo_physmem::copy::{BatchCopy, CopyJob, CopyPolicy, MtCopy, Vanilla};
use largo_physmem::{Backing, RamBacking};
use largo_types::Pfn;

const PAGE: u64 = 4096;

/// A pattern that differs in every page and every byte position.
fn pattern(pfn: u64, seed: u64) -> Vec<u8> {
    (0..PAGE)
        .map(|i| ((pfn.wrapping_mul(2654435761) ^ i.wrapping_mul(40503) ^ seed) % 251) as u8)
        .collect()
}

/// Folios of 1, 16 and 512 pages from the low half to the high half.
fn jobs(nr_pages: u64) -> Vec<CopyJob> {
    let half = nr_pages / 2;
    let (mut src, mut dst) = (0u64, half);
    let mut out = Vec::new();
    for (i, size) in [512u64, 1, 16, 16, 1, 512, 16, 1, 1, 512].into_iter().enumerate() {
        let src_at = src.next_multiple_of(size);
        let dst_at = dst.next_multiple_of(size);
        out.push(CopyJob {
            src: Pfn(src_at),
            dst: Pfn(dst_at),
            nr_pages: size,
        });
        src = src_at + size + (i as u64 % 3);
        dst = dst_at + size;
    }
    assert!(src <= half && dst <= nr_pages);
    out
}

#[test]
fn every_policy_moves_the_bytes_exactly() {
    let nr_pages = 8192;
    let policies: Vec<Box<dyn CopyPolicy>> = vec![
        Box::new(Vanilla),
        Box::new(BatchCopy),
        Box::new(MtCopy::new(1, 16)),
        Box::new(MtCopy::new(2, 16)),
        Box::new(MtCopy::new(3, 1)),
    ];
    for (seed, policy) in policies.iter().enumerate() {
        let mut b = RamBacking::new(nr_pages, PAGE).unwrap();
        for pfn in 0..nr_pages / 2 {
            b.write(Pfn(pfn), 0, &pattern(pfn, seed as u64)).unwrap();
        }
        let jobs = jobs(nr_pages);
        policy.copy(&mut b, &jobs).unwrap();
        let mut buf = vec![0u8; PAGE as usize];
        for j in &jobs {
            for k in 0..j.nr_pages {
                b.read(Pfn(j.dst.0 + k), 0, &mut buf).unwrap();
                assert!(
                    buf == pattern(j.src.0 + k, seed as u64),
                    "{}: page {k} of the folio {:?} differs",
                    policy.name(),
                    j
                );
            }
        }
        assert_eq!(
            b.stats().copied_bytes,
            jobs.iter().map(|j| j.nr_pages * PAGE).sum::<u64>()
        );
    }
}

#[test]
fn overlapping_or_out_of_range_jobs_are_refused_untouched() {
    let mut b = RamBacking::new(64, PAGE).unwrap();
    b.write(Pfn(40), 0, &[7; 16]).unwrap();
    let overlapping = [
        CopyJob {
            src: Pfn(0),
            dst: Pfn(32),
            nr_pages: 16,
        },
        CopyJob {
            src: Pfn(16),
            dst: Pfn(40),
            nr_pages: 8,
        },
    ];
    let mt = MtCopy::new(2, 4);
    assert!(mt.copy(&mut b, &overlapping).is_err());
    let mut buf = [0u8; 16];
    b.read(Pfn(40), 0, &mut buf).unwrap();
    assert_eq!(buf, [7; 16], "nothing was copied");
    let outside = [CopyJob {
        src: Pfn(60),
        dst: Pfn(0),
        nr_pages: 8,
    }];
    assert!(mt.copy(&mut b, &outside).is_err());
}
