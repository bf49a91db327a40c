//! Mapping from byte offsets of a derived view back to byte offsets of the original.

/// One run of view bytes and the original bytes they came from. An `aligned`
/// segment maps byte i of the view to byte i of the original (same length, e.g.
/// ASCII lowercasing); any other segment maps as a whole to its original range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    view_start: usize,
    view_len: usize,
    orig_start: usize,
    orig_len: usize,
    aligned: bool,
}

/// Run-length map from view offsets to original offsets. Aligned neighbours are
/// merged, so a mostly-ASCII view costs a handful of segments, not one per byte.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetMap {
    segments: Vec<Segment>,
    view_len: usize,
}

impl OffsetMap {
    /// The map of a view that is byte-for-byte the original (or of equal-length edits).
    pub fn identity(len: usize) -> OffsetMap {
        let mut m = OffsetMap::default();
        m.push(len, 0, len);
        m
    }

    /// A view whose every byte maps to one original range (a decoded segment).
    pub fn opaque(view_len: usize, orig_start: usize, orig_len: usize) -> OffsetMap {
        let mut m = OffsetMap::default();
        m.push_opaque(view_len, orig_start, orig_len);
        m
    }

    pub fn view_len(&self) -> usize {
        self.view_len
    }

    /// Append `view_len` view bytes produced from `orig_start..orig_start+orig_len`.
    /// Equal lengths are aligned byte-for-byte.
    pub fn push(&mut self, view_len: usize, orig_start: usize, orig_len: usize) {
        self.push_segment(view_len, orig_start, orig_len, view_len == orig_len);
    }

    /// Append view bytes that map as a whole to the original range.
    pub fn push_opaque(&mut self, view_len: usize, orig_start: usize, orig_len: usize) {
        self.push_segment(view_len, orig_start, orig_len, false);
    }

    fn push_segment(&mut self, view_len: usize, orig_start: usize, orig_len: usize, aligned: bool) {
        if view_len == 0 {
            return;
        }
        if aligned {
            if let Some(last) = self.segments.last_mut() {
                if last.aligned && last.orig_start + last.orig_len == orig_start {
                    last.view_len += view_len;
                    last.orig_len += orig_len;
                    self.view_len += view_len;
                    return;
                }
            }
        }
        self.segments.push(Segment {
            view_start: self.view_len,
            view_len,
            orig_start,
            orig_len,
            aligned,
        });
        self.view_len += view_len;
    }

    fn segment_at(&self, view_offset: usize) -> Option<&Segment> {
        let i = self
            .segments
            .partition_point(|s| s.view_start + s.view_len <= view_offset);
        self.segments.get(i)
    }

    /// Original byte range of the view range `start..end`. Out-of-range offsets are
    /// clamped, so a caller can never index past the original.
    pub fn to_original(&self, start: usize, end: usize) -> (usize, usize) {
        map_range(|x| self.segment_at(x), self.segments.last(), start, end)
    }

    /// A [`Cursor`]: `to_original` for ranges visited in increasing order.
    pub fn cursor(&self) -> Cursor<'_> {
        Cursor { map: self, at: 0 }
    }
}

/// `to_original` for view ranges visited mostly in increasing order (a view
/// rebuilt character by character): each lookup moves a position forward
/// instead of searching the segments again. Any order gives the same answers as
/// [`OffsetMap::to_original`]; a step back searches.
pub struct Cursor<'a> {
    map: &'a OffsetMap,
    at: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn seek(&mut self, x: usize) -> Option<&'a Segment> {
        let segs: &'a [Segment] = &self.map.segments;
        let end = |s: &Segment| s.view_start + s.view_len;
        if self.at > 0 && segs.get(self.at - 1).is_some_and(|s| end(s) > x) {
            self.at = segs.partition_point(|s| end(s) <= x);
        }
        while segs.get(self.at).is_some_and(|s| end(s) <= x) {
            self.at += 1;
        }
        segs.get(self.at)
    }

    /// Where `start..end` begins in the original when the whole range lies in one
    /// aligned segment (each of its bytes maps to the same byte there), else None.
    #[inline]
    pub fn aligned(&mut self, start: usize, end: usize) -> Option<usize> {
        let s = self.seek(start)?;
        (s.aligned && s.view_start <= start && end <= s.view_start + s.view_len)
            .then(|| s.orig_start + (start - s.view_start))
    }

    #[inline]
    pub fn original(&mut self, start: usize, end: usize) -> (usize, usize) {
        let last = self.map.segments.last();
        map_range(|x| self.seek(x), last, start, end)
    }
}

/// The range mapping shared by the search and the cursor: `at(x)` is the segment
/// holding view byte `x` (the first ending after it), `last` the final segment.
#[inline]
fn map_range<'a>(
    mut at: impl FnMut(usize) -> Option<&'a Segment>,
    last_segment: Option<&'a Segment>,
    start: usize,
    end: usize,
) -> (usize, usize) {
    let Some(first) = at(start).or(last_segment) else {
        return (0, 0);
    };
    let o_start = if first.aligned && start >= first.view_start {
        first.orig_start + (start - first.view_start).min(first.orig_len)
    } else {
        first.orig_start
    };
    if end <= start {
        return (o_start, o_start);
    }
    let Some(last) = at(end - 1).or(last_segment) else {
        return (o_start, o_start);
    };
    let o_end = if last.aligned && end > last.view_start {
        last.orig_start + (end - last.view_start).min(last.orig_len)
    } else {
        last.orig_start + last.orig_len
    };
    (o_start, o_end.max(o_start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_answers_as_the_search_does_in_any_order() {
        let mut m = OffsetMap::default();
        m.push(2, 0, 2);
        m.push_opaque(3, 2, 7);
        m.push(4, 9, 4);
        m.push(1, 13, 3);
        m.push(5, 16, 5);
        let n = m.view_len() + 2;
        let ranges: Vec<(usize, usize)> = (0..n)
            .flat_map(|s| (s..n + 1).map(move |e| (s, e)))
            .collect();
        let mut c = m.cursor();
        for &(s, e) in ranges.iter().chain(ranges.iter().rev()) {
            assert_eq!(c.original(s, e), m.to_original(s, e), "{s}..{e}");
        }
        assert_eq!(OffsetMap::default().cursor().original(3, 4), (0, 0));
    }

    #[test]
    fn identity_maps_each_byte() {
        let m = OffsetMap::identity(10);
        assert_eq!(m.to_original(2, 5), (2, 5));
        assert_eq!(m.to_original(0, 10), (0, 10));
    }

    #[test]
    fn removed_bytes_are_skipped_and_merges_stay_correct() {
        // original "ab\u{200b}cd": the zero-width space (3 bytes at 2..5) is dropped.
        let mut m = OffsetMap::default();
        m.push(2, 0, 2);
        m.push(2, 5, 2);
        assert_eq!(m.view_len(), 4);
        assert_eq!(m.to_original(0, 4), (0, 7));
        assert_eq!(m.to_original(2, 3), (5, 6));
        assert_eq!(
            m.segments.len(),
            2,
            "non-contiguous originals are not merged"
        );
    }

    #[test]
    fn expansion_maps_as_a_whole() {
        // "ﬁ" (3 bytes) becomes "fi" (2 bytes): both view bytes map to the ligature.
        let mut m = OffsetMap::default();
        m.push(1, 0, 1);
        m.push(2, 1, 3);
        m.push(1, 4, 1);
        assert_eq!(m.to_original(1, 2), (1, 4));
        assert_eq!(m.to_original(2, 3), (1, 4));
        assert_eq!(m.to_original(0, 4), (0, 5));
    }

    #[test]
    fn opaque_and_out_of_range_are_clamped() {
        let m = OffsetMap::opaque(100, 7, 20);
        assert_eq!(m.to_original(40, 60), (7, 27));
        assert_eq!(m.to_original(500, 900), (7, 27));
        assert_eq!(OffsetMap::default().to_original(3, 4), (0, 0));
    }
}
