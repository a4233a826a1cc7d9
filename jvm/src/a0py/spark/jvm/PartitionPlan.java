package a0py.spark.jvm;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A read's partitions: the chunks each file's summary says a read needs
 * (skipping those the pushed filters rule out), cut into runs of about
 * maxPartitionBytes uncompressed bytes, as many as the cores can share
 * evenly.
 */
final class PartitionPlan {
  private PartitionPlan() {}

  static List<A0Scan.Partition> plan(List<String> spec, Predicate predicate, ReadOptions read, int parallelism) {
    List<FileRefs> files = new ArrayList<>();
    for (String src : A0Scan.expandPaths(spec)) {
      String empty = McapLayout.noRecordYet(src);
      if (empty != null) {
        System.err.println("a0py: warning: skipping " + empty);
        continue;
      }
      McapLayout lay = McapLayout.cached(src);
      A0Scan.Channels chans = new A0Scan.Channels(lay, read.decode);
      Set<Integer> wanted = new HashSet<>();
      Set<Integer> typed = new HashSet<>();
      Map<Integer, Integer> headersOf = new HashMap<>();
      for (int i = 0; i < chans.ids.length; i++) {
        byte k = chans.kinds[i];
        int id = chans.ids[i];
        boolean selected = predicate.topicOk(chans.topics[i]);
        if (((k == A0Scan.KIND_PACKET || k == A0Scan.KIND_TYPED) && selected)
            || (k == A0Scan.KIND_FOREIGN && selected && !predicate.hasSeqBound()) // its rows' seq is NULL
            || (k == A0Scan.KIND_GAP && read.gaps && !predicate.empty)) {
          wanted.add(id);
        }
        if (k == A0Scan.KIND_TYPED && selected && chans.headerIds[i] >= 0) {
          typed.add(id);
          headersOf.put(id, chans.headerIds[i]);
        }
      }
      Map<Long, long[][]> meta = chunkMeta(lay);
      List<McapLayout.Ref> refs = new ArrayList<>();
      for (McapLayout.Ref ref : lay.chunks) {
        if (ref.channelIds != null && java.util.Arrays.stream(ref.channelIds).noneMatch(wanted::contains)) {
          continue;
        }
        long[][] info = meta.get(ref.offset);
        // a0py.chunks ranges hold for a0py's channels: a chunk that may hold another channel is kept.
        if (info != null && info.length > 0 && covers(info, ref.channelIds)) {
          boolean any = false;
          for (long[] i : info) {
            if (wanted.contains((int) i[0]) && predicate.seqRangeOk(i[1], i[2])
                && predicate.wallRangeOk(Math.floorDiv(i[3], 1000L), Math.floorDiv(i[4], 1000L))) {
              any = true;
              break;
            }
          }
          if (!any) {
            continue;
          }
        }
        // The chunk index's message time range is of log times (a foreign chunk, which has no
        // a0py.chunks ranges, is never skipped by a time_wall filter: its publish times are unknown).
        if (!predicate.logRangeOk(capped(ref.startTime) / 1000, capped(ref.endTime) / 1000)) {
          continue;
        }
        refs.add(ref);
      }
      refs.addAll(lay.regions);
      if (refs.isEmpty()) {
        continue;
      }
      McapLayout.Ref[][] near = new McapLayout.Ref[refs.size()][];
      for (int r = 0; r < near.length; r++) {
        near[r] = companions(lay, refs.get(r), typed, headersOf);
      }
      files.add(new FileRefs(src, chans, refs.toArray(new McapLayout.Ref[0]), near));
    }
    return cut(files, read.partitionBytes, parallelism);
  }

  /** The chunks (and message regions) of one file that a read needs, with their typed rows' companions. */
  private static final class FileRefs {
    final String src;
    final A0Scan.Channels chans;
    final McapLayout.Ref[] refs;
    final McapLayout.Ref[][] near;

    FileRefs(String src, A0Scan.Channels chans, McapLayout.Ref[] refs, McapLayout.Ref[][] near) {
      this.src = src;
      this.chans = chans;
      this.refs = refs;
      this.near = near;
    }
  }

  /**
   * The files' chunks, in order, cut into partitions of about equal uncompressed bytes: as many
   * as maxPartitionBytes asks for, rounded up to a multiple of the session's default
   * parallelism when more than one, so that every core has as much to read (7 partitions on 2
   * cores would leave one idle for the last one). A partition starts at the chunk whose middle
   * passes its share of the bytes.
   */
  static List<A0Scan.Partition> cut(List<FileRefs> files, long partitionBytes, int parallelism) {
    long total = 0;
    for (FileRefs f : files) {
      for (McapLayout.Ref r : f.refs) {
        total += r.uncompressedSize;
      }
    }
    double n = Math.max(1, Math.ceil((double) total / partitionBytes));
    if (n > 1 && parallelism > 1) {
      n = Math.ceil(n / parallelism) * parallelism;
    }
    double share = total / n;
    List<A0Scan.Partition> parts = new ArrayList<>();
    A0Scan.Partition cur = new A0Scan.Partition();
    long before = 0; // the bytes of the chunks before this one
    for (FileRefs f : files) {
      int from = 0;
      for (int r = 0; r < f.refs.length; r++) {
        long w = f.refs[r].uncompressedSize;
        boolean empty = cur.slices.isEmpty() && r == from;
        if (!empty && before + w / 2.0 > share * (parts.size() + 1)) {
          addSlice(cur, f, from, r);
          parts.add(cur);
          cur = new A0Scan.Partition();
          from = r;
        }
        before += w;
      }
      addSlice(cur, f, from, f.refs.length);
    }
    if (!cur.slices.isEmpty() || parts.isEmpty()) {
      parts.add(cur);
    }
    return parts;
  }

  private static void addSlice(A0Scan.Partition p, FileRefs f, int from, int to) {
    if (to > from) {
      p.slices.add(new A0Scan.Slice(f.src, f.chans, java.util.Arrays.copyOfRange(f.refs, from, to),
          java.util.Arrays.copyOfRange(f.near, from, to)));
      for (int r = from; r < to; r++) {
        p.weight += f.refs[r].uncompressedSize;
      }
    }
  }

  private static boolean covers(long[][] info, int[] ids) {
    if (ids == null) {
      return true;
    }
    for (int id : ids) {
      boolean found = false;
      for (long[] i : info) {
        found |= i[0] == id;
      }
      if (!found) {
        return false;
      }
    }
    return true;
  }

  static long capped(long u64) {
    return u64 < 0 ? Long.MAX_VALUE : u64;
  }

  /**
   * The chunks that may hold the headers messages of chunk {@code ref}'s typed messages: the writer
   * puts them in a chunk of the same times next to it, so chunks whose log-time range overlaps
   * ref's and that may hold a headers channel of a selected typed channel, nearest first, at most
   * A0Scan.COMPANIONS of them. Read by the reader only when a typed message's headers are not in ref itself.
   */
  private static McapLayout.Ref[] companions(McapLayout lay, McapLayout.Ref ref, Set<Integer> typed,
      Map<Integer, Integer> headersOf) {
    if (typed.isEmpty() || ref.region) {
      return null;
    }
    Set<Integer> hids = new HashSet<>();
    for (int t : typed) {
      if (ref.holds(t)) {
        hids.add(headersOf.get(t));
      }
    }
    if (hids.isEmpty()) {
      return null;
    }
    // lay.chunks is in file order: look outward from ref, the chunk before it first.
    List<McapLayout.Ref> chunks = lay.chunks;
    int at = java.util.Collections.binarySearch(chunks, ref, (a, b) -> Long.compare(a.offset, b.offset));
    if (at < 0) {
      return null;
    }
    List<McapLayout.Ref> out = new ArrayList<>();
    for (int d = 1; d <= A0Scan.NEAR_SCAN && out.size() < A0Scan.COMPANIONS; d++) {
      for (int i : new int[] {at - d, at + d}) {
        if (i >= 0 && i < chunks.size() && out.size() < A0Scan.COMPANIONS) {
          McapLayout.Ref c = chunks.get(i);
          if (c.overlaps(ref.startTime, ref.endTime) && hids.stream().anyMatch(c::holds)) {
            out.add(c);
          }
        }
      }
    }
    return out.isEmpty() ? null : out.toArray(new McapLayout.Ref[0]);
  }

  /** chunk offset -> [channel, seq_lo, seq_hi, pub_lo, pub_hi] from a0py.chunks (empty when unreadable). */
  private static Map<Long, long[][]> chunkMeta(McapLayout lay) {
    Map<Long, long[][]> out = new HashMap<>();
    try {
      for (Map.Entry<String, String> e : lay.chunkMeta.entrySet()) {
        List<long[]> items = new ArrayList<>();
        for (String item : e.getValue().split(";")) {
          if (item.isEmpty()) {
            continue;
          }
          String[] f = item.split(":");
          if (f.length != 5) {
            return new HashMap<>();
          }
          long[] v = new long[5];
          for (int i = 0; i < 5; i++) {
            v[i] = Long.parseLong(f[i].trim());
          }
          items.add(v);
        }
        out.put(Long.parseLong(e.getKey().trim()), items.toArray(new long[0][]));
      }
    } catch (NumberFormatException ex) {
      return new HashMap<>();
    }
    return out;
  }
}
