// SPDX-License-Identifier: Apache-2.0
#include "engine/util/work_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

namespace sinkscope {

namespace fs = std::filesystem;

namespace {

constexpr int kJournalVersion = 1;
const char* const kRankInfix = ".rank-";

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string header_line(const std::string& fingerprint, const JournalInfo& info, int rank,
                        const std::string& host) {
  Json j;
  j["sinkscope_journal"] = kJournalVersion;
  j["fingerprint"] = fingerprint;
  j["command"] = info.command;
  j["label"] = info.label;
  j["units"] = info.units;
  j["rank"] = rank;
  j["host"] = host;
  j["started"] = unix_now();
  return dump_json(j);
}

[[noreturn]] void throw_errno(const std::string& what, const fs::path& p) {
  throw std::system_error(errno, std::generic_category(), what + " " + p.string());
}

// Writes all of `data` at the end of the open file, then fsyncs it.
void append_all(int fd, std::string_view data, const fs::path& p) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot append to the journal", p);
    }
    data.remove_prefix(size_t(n));
  }
  if (::fsync(fd) != 0) throw_errno("cannot fsync the journal", p);
}

Json counts_to_json(const TileCounts& t) {
  Json j;
  j["visited"] = static_cast<long long>(t.visited);
  j["skipped"] = static_cast<long long>(t.skipped);
  j["mass_bound_max"] = t.mass_bound_max;
  j["mass_bound_sum"] = t.mass_bound_sum;
  j["rows"] = static_cast<long long>(t.rows);
  return j;
}

TileCounts read_counts(const Json& v) {
  TileCounts t;
  t.visited = v.at("visited").get<int64_t>();
  t.skipped = v.at("skipped").get<int64_t>();
  t.mass_bound_max = v.at("mass_bound_max").get<double>();
  t.mass_bound_sum = v.at("mass_bound_sum").get<double>();
  t.rows = v.at("rows").get<int64_t>();
  return t;
}

}  // namespace

Json outcome_to_json(const SampleOutcome& o) {
  Json j;
  j["id"] = o.id;
  j["kind"] = o.kind;
  j["class"] = to_string(o.cls);
  j["tokens"] = o.tokens;
  Json& c = j["cmp"];
  c["positions"] = static_cast<long long>(o.cmp.positions);
  c["kl_sum"] = o.cmp.kl_sum;
  c["kl_max"] = o.cmp.kl_max;
  c["top1_agree"] = static_cast<long long>(o.cmp.top1_agree);
  c["nll_dense"] = o.cmp.nll_dense;
  c["nll_variant"] = o.cmp.nll_variant;
  c["scored"] = static_cast<long long>(o.cmp.scored);
  j["rouge_l"] = number_or_null(o.rouge_l);
  j["passkey_dense"] = o.passkey_dense;
  j["passkey_variant"] = o.passkey_variant;
  j["prefill"] = counts_to_json(o.prefill);
  j["decode"] = counts_to_json(o.decode);
  j["peak_kv_bytes"] = static_cast<long long>(o.peak_kv_bytes);
  j["seconds"] = o.seconds;
  j["ttft_ms_sum"] = o.ttft_ms_sum;
  j["ttft_n"] = o.ttft_n;
  j["tpot_ms_sum"] = o.tpot_ms_sum;
  j["tpot_n"] = static_cast<long long>(o.tpot_n);
  return j;
}

SampleOutcome outcome_from_json(const Json& v) {
  SampleOutcome o;
  o.id = v.at("id").get<std::string>();
  o.kind = v.at("kind").get<std::string>();
  o.cls = parse_sample_class(v.at("class").get<std::string>());
  o.tokens = v.at("tokens").get<int>();
  const Json& c = v.at("cmp");
  o.cmp.positions = c.at("positions").get<int64_t>();
  o.cmp.kl_sum = c.at("kl_sum").get<double>();
  o.cmp.kl_max = c.at("kl_max").get<double>();
  o.cmp.top1_agree = c.at("top1_agree").get<int64_t>();
  o.cmp.nll_dense = c.at("nll_dense").get<double>();
  o.cmp.nll_variant = c.at("nll_variant").get<double>();
  o.cmp.scored = c.at("scored").get<int64_t>();
  o.rouge_l = number_or_nan(v.at("rouge_l"));
  o.passkey_dense = v.at("passkey_dense").get<bool>();
  o.passkey_variant = v.at("passkey_variant").get<bool>();
  o.prefill = read_counts(v.at("prefill"));
  o.decode = read_counts(v.at("decode"));
  o.peak_kv_bytes = v.at("peak_kv_bytes").get<int64_t>();
  o.seconds = v.at("seconds").get<double>();
  o.ttft_ms_sum = v.at("ttft_ms_sum").get<double>();
  o.ttft_n = v.at("ttft_n").get<int>();
  o.tpot_ms_sum = v.at("tpot_ms_sum").get<double>();
  o.tpot_n = v.at("tpot_n").get<int64_t>();
  return o;
}

fs::path journal_base(const fs::path& rank_file) {
  const std::string name = rank_file.string();
  const size_t at = name.rfind(kRankInfix);
  if (at == std::string::npos) return {};
  const std::string rank = name.substr(at + std::string(kRankInfix).size());
  if (rank.empty() || !std::all_of(rank.begin(), rank.end(), ::isdigit)) return {};
  return fs::path(name.substr(0, at));
}

fs::path journal_file(const fs::path& base, int rank) {
  return fs::path(base.string() + kRankInfix + std::to_string(rank));
}

std::vector<fs::path> journal_files(const fs::path& base) {
  std::vector<std::pair<long, fs::path>> found;
  const fs::path dir = base.has_parent_path() ? base.parent_path() : fs::path(".");
  const std::string prefix = base.filename().string() + kRankInfix;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rank = name.substr(prefix.size());
    if (rank.empty() || !std::all_of(rank.begin(), rank.end(), ::isdigit)) continue;
    found.emplace_back(std::stol(rank), e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [r, p] : found) out.push_back(std::move(p));
  return out;
}

std::map<uint64_t, JournalEntry> read_journal(const fs::path& base,
                                              const std::string& fingerprint) {
  std::map<uint64_t, JournalEntry> done;
  for (const fs::path& file : journal_files(base)) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw JournalError("cannot read the journal " + file.string());
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    size_t pos = 0;
    int line_no = 0;
    while (pos < text.size()) {
      const size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) break;  // a torn last line: the unit did not finish
      const std::string_view line(text.data() + pos, nl - pos);
      pos = nl + 1;
      ++line_no;
      Json v;
      try {
        v = Json::parse(line);
      } catch (const Json::parse_error& e) {
        throw JournalError(file.string() + ":" + std::to_string(line_no) +
                           ": damaged journal line (" + e.what() + ")");
      }
      try {
        if (line_no == 1) {
          if (!v.is_object() || !v.contains("sinkscope_journal") ||
              v.at("fingerprint").get<std::string>() != fingerprint)
            throw JournalError(
                "the journal " + file.string() +
                " belongs to another run (different settings, dataset, model or options); "
                "rerun with the same arguments, or remove " + base.string() + ".rank-*");
          continue;
        }
        JournalEntry e;
        e.unit = v.at("unit").get<uint64_t>();
        e.rank = v.at("rank").get<int>();
        e.host = v.at("host").get<std::string>();
        e.outcome = outcome_from_json(v.at("outcome"));
        done.emplace(e.unit, std::move(e));
      } catch (const JournalError&) {
        throw;
      } catch (const std::exception& e) {  // a missing key or wrong type, or a class name that does not parse
        throw JournalError(file.string() + ":" + std::to_string(line_no) +
                           ": damaged journal line (" + e.what() + ")");
      }
    }
  }
  return done;
}

size_t count_journal_units(const fs::path& base) {
  size_t n = 0;
  for (const fs::path& f : journal_files(base)) {
    std::ifstream in(f, std::ios::binary);
    size_t lines = 0;
    char buf[1 << 16];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
      lines += size_t(std::count(buf, buf + in.gcount(), '\n'));
      if (!in) break;
    }
    if (lines > 0) n += lines - 1;  // the header
  }
  return n;
}

JournalProgress journal_progress(const fs::path& base, double now) {
  const std::vector<fs::path> files = journal_files(base);
  if (files.empty())
    throw JournalError("no journal files " + base.string() + ".rank-* (the run finished, or has "
                       "not started)");
  JournalProgress p;
  double newest_start = 0;
  std::vector<double> times;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string header;
    if (!std::getline(in, header) || in.eof())  // a header line ends in a newline
      continue;                                  // being written
    Json h;
    try {
      h = Json::parse(header);
    } catch (const Json::parse_error&) {
      throw JournalError(file.string() + " is not a SinkScope journal");
    }
    if (!h.is_object() || !h.contains("sinkscope_journal"))
      throw JournalError(file.string() + " is not a SinkScope journal");
    ++p.processes;
    if (auto c = h.find("command"); c != h.end() && p.info.command.empty()) {
      p.info.command = c->get<std::string>();
      p.info.label = h.at("label").get<std::string>();
      p.info.units = h.at("units").get<uint64_t>();
    }
    if (auto host = h.find("host"); host != h.end())
      if (std::find(p.hosts.begin(), p.hosts.end(), host->get<std::string>()) == p.hosts.end())
        p.hosts.push_back(host->get<std::string>());
    if (auto st = h.find("started"); st != h.end()) {
      const double t = st->get<double>();
      if (p.started == 0 || t < p.started) p.started = t;
      newest_start = std::max(newest_start, t);
    }
    // Entries: whole lines only; each one's finishing time (a cheap scan, not a parse).
    std::string line;
    while (std::getline(in, line) && !in.eof()) {
      ++p.done;
      const size_t at = line.find("\"time\":");
      if (at != std::string::npos) times.push_back(std::strtod(line.c_str() + at + 7, nullptr));
    }
  }
  // Units finished before the newest start belong to an earlier (resumed) run; the rate counts
  // the ones since.
  for (double t : times) {
    p.last = std::max(p.last, t);
    if (t < newest_start) ++p.done_at_start;
  }
  const uint64_t since = p.done - p.done_at_start;
  if (since > 0 && p.info.units > p.done && now > newest_start)
    p.eta_s = (now - newest_start) * double(p.info.units - p.done) / double(since);
  else if (p.info.units > 0 && p.done >= p.info.units)
    p.eta_s = 0;
  return p;
}

void remove_journal(const fs::path& base) {
  for (const fs::path& f : journal_files(base)) {
    std::error_code ec;
    fs::remove(f, ec);
  }
}

JournalWriter::JournalWriter(const fs::path& base, int rank, std::string host,
                             std::string fingerprint, const JournalInfo& info)
    : m_path(journal_file(base, rank)), m_rank(rank), m_host(std::move(host)) {
  std::error_code ec;
  std::string text;
  if (fs::exists(m_path, ec)) {
    std::ifstream in(m_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const size_t keep = text.empty() ? 0 : text.rfind('\n') == std::string::npos ? 0
                                                                               : text.rfind('\n') + 1;
  if (keep > 0) {
    const std::string first = text.substr(0, text.find('\n'));
    bool same = false;
    try {
      const Json h = Json::parse(first);
      same = h.is_object() && h.contains("fingerprint") &&
             h.at("fingerprint").get<std::string>() == fingerprint;
    } catch (const Json::exception&) {
    }
    if (!same)
      throw JournalError("the journal " + m_path.string() +
                         " belongs to another run; rerun with the same arguments, or remove " +
                         base.string() + ".rank-*");
  }
  if (keep != text.size()) {  // a torn last line: cut it off
    fs::resize_file(m_path, keep, ec);
    if (ec) throw std::system_error(ec, "cannot repair the journal " + m_path.string());
  }
  if (keep == 0) {
    const int fd = ::open(m_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) throw_errno("cannot create the journal", m_path);
    try {
      append_all(fd, header_line(fingerprint, info, m_rank, m_host) + "\n", m_path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
}

void JournalWriter::append(uint64_t unit, const SampleOutcome& o) {
  append_json(unit, dump_json(outcome_to_json(o)));
}

void JournalWriter::append_json(uint64_t unit, std::string_view outcome_json) {
  Json j;
  j["unit"] = unit;
  j["rank"] = m_rank;
  j["host"] = m_host;
  j["time"] = unix_now();
  // The header fields, then the outcome as serialised by the caller.
  std::string line = dump_json(j);
  line.pop_back();  // the closing brace
  line.append(",\"outcome\":").append(outcome_json).append("}");
  const int fd = ::open(m_path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open the journal", m_path);
  try {
    append_all(fd, line + "\n", m_path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

}  // namespace sinkscope
