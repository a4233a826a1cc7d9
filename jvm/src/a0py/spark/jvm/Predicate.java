package a0py.spark.jvm;

import java.io.Serializable;
import java.util.HashSet;
import java.util.Set;

/**
 * A conjunction the reader applies exactly (the Python source's Predicate):
 * topic in {@code topics}, seq in [seqLo, seqHi] (and in seqIn), time_wall in
 * [wallLo, wallHi] and log_time in [logLo, logHi] (µs since the epoch); null is
 * no bound. Immutable: every
 * {@code and*} returns a narrower copy.
 */
final class Predicate implements Serializable {
  private static final long serialVersionUID = 1L;

  final Set<String> topics;
  final Long seqLo;
  final Long seqHi;
  final Set<Long> seqIn;
  final Long wallLo;
  final Long wallHi;
  final Long logLo;
  final Long logHi;
  final boolean empty;

  Predicate() {
    this(null, null, null, null, null, null, null, null);
  }

  private Predicate(Set<String> topics, Long seqLo, Long seqHi, Set<Long> seqIn, Long wallLo, Long wallHi,
      Long logLo, Long logHi) {
    this.topics = topics;
    this.seqLo = seqLo;
    this.seqHi = seqHi;
    this.seqIn = seqIn;
    this.wallLo = wallLo;
    this.wallHi = wallHi;
    this.logLo = logLo;
    this.logHi = logHi;
    this.empty = (topics != null && topics.isEmpty())
        || (seqLo != null && seqHi != null && seqLo > seqHi)
        || (seqIn != null && seqIn.isEmpty())
        || (wallLo != null && wallHi != null && wallLo > wallHi)
        || (logLo != null && logHi != null && logLo > logHi);
  }

  Predicate andTopics(Set<String> t) {
    Set<String> next = new HashSet<>(t);
    if (topics != null) {
      next.retainAll(topics);
    }
    return new Predicate(next, seqLo, seqHi, seqIn, wallLo, wallHi, logLo, logHi);
  }

  Predicate andSeq(Long lo, Long hi, Set<Long> values) {
    Long l = lo == null ? seqLo : (seqLo == null ? lo : Long.valueOf(Math.max(seqLo, lo)));
    Long h = hi == null ? seqHi : (seqHi == null ? hi : Long.valueOf(Math.min(seqHi, hi)));
    Set<Long> in = seqIn;
    if (values != null) {
      in = new HashSet<>(values);
      if (seqIn != null) {
        in.retainAll(seqIn);
      }
    }
    return new Predicate(topics, l, h, in, wallLo, wallHi, logLo, logHi);
  }

  Predicate andWall(Long lo, Long hi) {
    Long l = lo == null ? wallLo : (wallLo == null ? lo : Long.valueOf(Math.max(wallLo, lo)));
    Long h = hi == null ? wallHi : (wallHi == null ? hi : Long.valueOf(Math.min(wallHi, hi)));
    return new Predicate(topics, seqLo, seqHi, seqIn, l, h, logLo, logHi);
  }

  Predicate andLog(Long lo, Long hi) {
    Long l = lo == null ? logLo : (logLo == null ? lo : Long.valueOf(Math.max(logLo, lo)));
    Long h = hi == null ? logHi : (logHi == null ? hi : Long.valueOf(Math.min(logHi, hi)));
    return new Predicate(topics, seqLo, seqHi, seqIn, wallLo, wallHi, l, h);
  }

  boolean logOk(long us) {
    return (logLo == null || us >= logLo) && (logHi == null || us <= logHi);
  }

  /** Can a row logged (MCAP log_time) in [loUs, hiUs] pass? */
  boolean logRangeOk(long loUs, long hiUs) {
    return !(empty || (logLo != null && hiUs < logLo) || (logHi != null && loUs > logHi));
  }

  boolean topicOk(String topic) {
    return !empty && (topics == null || topics.contains(topic));
  }

  boolean hasSeqBound() {
    return seqLo != null || seqHi != null || seqIn != null;
  }

  boolean seqOk(long seq) {
    return (seqLo == null || seq >= seqLo) && (seqHi == null || seq <= seqHi)
        && (seqIn == null || seqIn.contains(seq));
  }

  boolean wallOk(long us) {
    return (wallLo == null || us >= wallLo) && (wallHi == null || us <= wallHi);
  }

  /** Can a row with lo <= seq <= hi pass? */
  boolean seqRangeOk(long lo, long hi) {
    if (empty || (seqLo != null && hi < seqLo) || (seqHi != null && lo > seqHi)) {
      return false;
    }
    if (seqIn != null) {
      for (long v : seqIn) {
        if (lo <= v && v <= hi) {
          return true;
        }
      }
      return false;
    }
    return true;
  }

  boolean wallRangeOk(long loUs, long hiUs) {
    return !(empty || (wallLo != null && hiUs < wallLo) || (wallHi != null && loUs > wallHi));
  }
}
