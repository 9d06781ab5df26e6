// SPDX-License-Identifier: Apache-2.0
// Privacy: the CLI's logs carry a prompt's length and fingerprint, never its text. Every command
// that reads a prompt or a text file runs in-process through run_cli() on a random-weight model
// with a distinctive secret; the streams run_cli() writes to and the process's own stdout/stderr
// file descriptors (where anything in the engine might print) are captured, and none may hold the
// secret, on success and on the error paths alike. Stdout may carry generated text (that is the
// product), and a prompt never appears there either.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "engine/format/gguf_writer.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;

// Distinctive and long enough that random generations cannot reproduce it; the pieces are
// checked too, so a log that printed part of the prompt is caught.
const std::string kSecret = "quokka-zebra 7731 the launch code is sapphire-otter-42";
const std::vector<std::string> kSecretPieces = {"quokka", "sapphire", "launch code", "otter-42"};

class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "sinkscope-privacy-XXXXXX").string();
    if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
    m_path = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

// Redirects a file descriptor to a temporary file for the object's lifetime.
class FdCapture {
 public:
  explicit FdCapture(int fd) : m_fd(fd) {
    std::fflush(nullptr);
    m_file = std::tmpfile();
    m_saved = ::dup(fd);
    ::dup2(::fileno(m_file), fd);
  }
  ~FdCapture() { release(); }
  std::string release() {
    if (m_saved < 0) return m_text;
    std::fflush(nullptr);
    std::cout.flush();
    std::cerr.flush();
    ::dup2(m_saved, m_fd);
    ::close(m_saved);
    m_saved = -1;
    std::rewind(m_file);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, m_file)) > 0) m_text.append(buf, n);
    std::fclose(m_file);
    return m_text;
  }

 private:
  int m_fd;
  int m_saved = -1;
  std::FILE* m_file = nullptr;
  std::string m_text;
};

struct CliRun {
  int status = -1;
  std::string out, err;        // the streams given to run_cli
  std::string fd_out, fd_err;  // anything written to the process's stdout / stderr
};

CliRun run(std::vector<std::string> args) {
  CliRun r;
  std::ostringstream out, err;
  FdCapture cap_out(STDOUT_FILENO), cap_err(STDERR_FILENO);
  r.status = cli::run_cli(args, out, err);
  r.fd_err = cap_err.release();
  r.fd_out = cap_out.release();
  r.out = out.str();
  r.err = err.str();
  return r;
}

void expect_no_secret(const std::string& text, const std::string& where) {
  EXPECT_EQ(text.find(kSecret), std::string::npos) << where << " holds the prompt:\n" << text;
  for (const std::string& piece : kSecretPieces)
    EXPECT_EQ(text.find(piece), std::string::npos)
        << where << " holds part of the prompt ('" << piece << "'):\n"
        << text;
}

void expect_private(const CliRun& r, const std::string& what) {
  expect_no_secret(r.err, what + ": stderr stream");
  expect_no_secret(r.out, what + ": stdout stream");
  expect_no_secret(r.fd_err, what + ": process stderr");
  expect_no_secret(r.fd_out, what + ": process stdout");
}

class Privacy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = new TempDir();
    TestModelShape shape;
    shape.n_vocab = 259 + kRandomLlamaEnglishMerges + 40;
    shape.n_ctx = 256;
    s_model = (s_dir->path() / "random.gguf").string();
    make_random_llama(shape, 97).write(s_model);
    s_text_file = (s_dir->path() / "secret.txt").string();
    std::ofstream(s_text_file) << kSecret << "\n" << kSecret << " " << kSecret << "\n";
  }
  static void TearDownTestSuite() {
    delete s_dir;
    s_dir = nullptr;
  }
  static inline TempDir* s_dir = nullptr;
  static inline std::string s_model, s_text_file;
};

TEST_F(Privacy, GenerateLogsLengthAndFingerprintOnly) {
  const CliRun r = run({"generate", "--model", s_model, "--prompt", kSecret, "--max-tokens", "4",
                     "--threads", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_private(r, "generate");
  // What the log does say: the prompt's size and its fingerprint.
  EXPECT_NE(r.err.find("prompt " + std::to_string(kSecret.size()) + " bytes"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("fingerprint "), std::string::npos) << r.err;
}

TEST_F(Privacy, GenerateJsonAndChat) {
  CliRun r = run({"generate", "--model", s_model, "--prompt", kSecret, "--max-tokens", "3",
               "--threads", "1", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_private(r, "generate --json");
  r = run({"generate", "--model", s_model, "--prompt=" + kSecret, "--system", "be brief",
           "--chat", "--max-tokens", "3", "--threads", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_private(r, "generate --chat");
  r = run({"generate", "--model", s_model, "--prompt-file", s_text_file, "--max-tokens", "2",
           "--threads", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_private(r, "generate --prompt-file");
}

TEST_F(Privacy, ErrorPathsDoNotEchoThePrompt) {
  // Longer than the context: a usage error that gives token counts, not text.
  std::string long_prompt;
  for (int i = 0; i < 20; ++i) long_prompt += kSecret + " ";
  CliRun r = run({"generate", "--model", s_model, "--prompt", long_prompt, "--ctx", "32",
               "--threads", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("longer than the context"), std::string::npos) << r.err;
  expect_private(r, "generate (too long)");
  // A bad option next to the prompt: the message names the option, not the prompt.
  r = run({"generate", "--model", s_model, "--prompt", kSecret, "--max-tokens", "lots"});
  EXPECT_EQ(r.status, 2);
  expect_private(r, "generate (bad option)");
  r = run({"trace", "--model", s_model, "--prompt", long_prompt, "--ctx", "32", "--out",
           (s_dir->path() / "t.json").string(), "--threads", "1"});
  EXPECT_EQ(r.status, 2);
  expect_private(r, "trace (too long)");
}

TEST_F(Privacy, PerplexityOfASecretFile) {
  const CliRun r = run({"perplexity", "--model", s_model, "--file", s_text_file, "--ctx", "32",
                     "--threads", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_private(r, "perplexity");
}

TEST_F(Privacy, TraceLogAndTraceFile) {
  const fs::path trace = s_dir->path() / "trace.json";
  const CliRun r = run({"trace", "--model", s_model, "--prompt", kSecret, "--max-tokens", "3",
                     "--out", trace.string(), "--summary", "--threads", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  expect_private(r, "trace");
  // The trace is shared with other people more than any log: it must not hold the prompt.
  std::ifstream in(trace);
  std::stringstream ss;
  ss << in.rdbuf();
  ASSERT_FALSE(ss.str().empty());
  expect_no_secret(ss.str(), "the Chrome trace file");
}

}  // namespace
}  // namespace sinkscope
