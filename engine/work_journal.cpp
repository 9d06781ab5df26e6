// SPDX-License-Identifier: Apache-2.0
#include "engine/work_journal.h"

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
  json::Writer w;
  w.begin_object();
  w.field("sinkscope_journal", kJournalVersion);
  w.field("fingerprint", fingerprint);
  w.field("command", info.command);
  w.field("label", info.label);
  w.field("units", static_cast<unsigned long long>(info.units));
  w.field("rank", rank);
  w.field("host", host);
  w.field("started", unix_now());
  w.end_object();
  return w.str();
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

void write_counts(json::Writer& w, const char* key, const TileCounts& t) {
  w.key(key).begin_object();
  w.field("visited", static_cast<long long>(t.visited));
  w.field("skipped", static_cast<long long>(t.skipped));
  w.field("mass_bound_max", t.mass_bound_max);
  w.field("mass_bound_sum", t.mass_bound_sum);
  w.field("rows", static_cast<long long>(t.rows));
  w.end_object();
}

TileCounts read_counts(const json::Value& v) {
  TileCounts t;
  t.visited = v["visited"].as_int();
  t.skipped = v["skipped"].as_int();
  t.mass_bound_max = v["mass_bound_max"].as_number();
  t.mass_bound_sum = v["mass_bound_sum"].as_number();
  t.rows = v["rows"].as_int();
  return t;
}

double number_or_nan(const json::Value& v) { return v.is_null() ? NAN : v.as_number(); }

}  // namespace

void write_outcome(json::Writer& w, const SampleOutcome& o) {
  w.begin_object();
  w.field("id", o.id);
  w.field("kind", o.kind);
  w.field("class", to_string(o.cls));
  w.field("tokens", o.tokens);
  w.key("cmp").begin_object();
  w.field("positions", static_cast<long long>(o.cmp.positions));
  w.field("kl_sum", o.cmp.kl_sum);
  w.field("kl_max", o.cmp.kl_max);
  w.field("top1_agree", static_cast<long long>(o.cmp.top1_agree));
  w.field("nll_dense", o.cmp.nll_dense);
  w.field("nll_variant", o.cmp.nll_variant);
  w.field("scored", static_cast<long long>(o.cmp.scored));
  w.end_object();
  w.field("rouge_l", o.rouge_l);  // NaN: null
  w.field("passkey_dense", o.passkey_dense);
  w.field("passkey_variant", o.passkey_variant);
  write_counts(w, "prefill", o.prefill);
  write_counts(w, "decode", o.decode);
  w.field("peak_kv_bytes", static_cast<long long>(o.peak_kv_bytes));
  w.field("seconds", o.seconds);
  w.field("ttft_ms_sum", o.ttft_ms_sum);
  w.field("ttft_n", o.ttft_n);
  w.field("tpot_ms_sum", o.tpot_ms_sum);
  w.field("tpot_n", static_cast<long long>(o.tpot_n));
  w.end_object();
}

SampleOutcome outcome_from_json(const json::Value& v) {
  SampleOutcome o;
  o.id = v["id"].as_string();
  o.kind = v["kind"].as_string();
  o.cls = parse_sample_class(v["class"].as_string());
  o.tokens = int(v["tokens"].as_int());
  const json::Value& c = v["cmp"];
  o.cmp.positions = c["positions"].as_int();
  o.cmp.kl_sum = c["kl_sum"].as_number();
  o.cmp.kl_max = c["kl_max"].as_number();
  o.cmp.top1_agree = c["top1_agree"].as_int();
  o.cmp.nll_dense = c["nll_dense"].as_number();
  o.cmp.nll_variant = c["nll_variant"].as_number();
  o.cmp.scored = c["scored"].as_int();
  o.rouge_l = number_or_nan(v["rouge_l"]);
  o.passkey_dense = v["passkey_dense"].as_bool();
  o.passkey_variant = v["passkey_variant"].as_bool();
  o.prefill = read_counts(v["prefill"]);
  o.decode = read_counts(v["decode"]);
  o.peak_kv_bytes = v["peak_kv_bytes"].as_int();
  o.seconds = v["seconds"].as_number();
  o.ttft_ms_sum = v["ttft_ms_sum"].as_number();
  o.ttft_n = int(v["ttft_n"].as_int());
  o.tpot_ms_sum = v["tpot_ms_sum"].as_number();
  o.tpot_n = v["tpot_n"].as_int();
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
      json::Value v;
      try {
        v = json::parse(line);
      } catch (const json::JsonError& e) {
        throw JournalError(file.string() + ":" + std::to_string(line_no) +
                           ": damaged journal line (" + e.what() + ")");
      }
      try {
        if (line_no == 1) {
          if (!v.find("sinkscope_journal") || v["fingerprint"].as_string() != fingerprint)
            throw JournalError(
                "the journal " + file.string() +
                " belongs to another run (different settings, dataset, model or options); "
                "rerun with the same arguments, or remove " + base.string() + ".rank-*");
          continue;
        }
        JournalEntry e;
        e.unit = uint64_t(v["unit"].as_int());
        e.rank = int(v["rank"].as_int());
        e.host = v["host"].as_string();
        e.outcome = outcome_from_json(v["outcome"]);
        done.emplace(e.unit, std::move(e));
      } catch (const JournalError&) {
        throw;
      } catch (const std::exception& e) {  // JsonError, or a class name that does not parse
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
    json::Value h;
    try {
      h = json::parse(header);
    } catch (const json::JsonError&) {
      throw JournalError(file.string() + " is not a SinkScope journal");
    }
    if (!h.find("sinkscope_journal"))
      throw JournalError(file.string() + " is not a SinkScope journal");
    ++p.processes;
    if (const json::Value* c = h.find("command"); c && p.info.command.empty()) {
      p.info.command = c->as_string();
      p.info.label = h["label"].as_string();
      p.info.units = uint64_t(h["units"].as_int());
    }
    if (const json::Value* host = h.find("host"))
      if (std::find(p.hosts.begin(), p.hosts.end(), host->as_string()) == p.hosts.end())
        p.hosts.push_back(host->as_string());
    if (const json::Value* st = h.find("started")) {
      const double t = st->as_number();
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
      const json::Value h = json::parse(first);
      same = h.find("fingerprint") && h["fingerprint"].as_string() == fingerprint;
    } catch (const json::JsonError&) {
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
  json::Writer w;
  write_outcome(w, o);
  append_json(unit, w.str());
}

void JournalWriter::append_json(uint64_t unit, std::string_view outcome_json) {
  json::Writer w;
  w.begin_object();
  w.field("unit", static_cast<unsigned long long>(unit));
  w.field("rank", m_rank);
  w.field("host", m_host);
  w.field("time", unix_now());
  w.end_object();
  // The header fields, then the outcome as written by write_outcome().
  std::string line = w.str();
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
