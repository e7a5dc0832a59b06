// `baton serve` end to end, through fake_baton (the real serve subcommand, stand-in scheduler and
// workers; see fake_baton_main.cc): start-up, readiness, failures, and that no child outlives it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/check.h"
#include "runtime/process/process_supervisor.h"
#include "tests/testing/status_matchers.h"

namespace baton::runtime {
namespace {

using ::absl_testing::IsOk;
using ::testing::HasSubstr;
using ::testing::ContainsRegex;
using ::testing::Not;

constexpr absl::Duration kPatience = absl::Seconds(20);

// A port free now, below the kernel's ephemeral range (32768 and up by default): every process that
// binds port 0 meanwhile (workers, other tests, outgoing connections) draws from that range, so none
// of them can take the port before the launcher binds it.
int FreePort() {
  static std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = std::uniform_int_distribution<int>(20000, 32000)(rng);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (free) return port;
  }
  BATON_CHECK(false);
  return 0;
}

bool ProcessGone(pid_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

std::string ReadFile(const std::filesystem::path& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

class ServeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("baton_serve_test_", getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "model");
    // `baton serve --model DIR` reads its config.json (--dtype auto, the default): a model
    // directory has one.
    WriteModelConfig();
    unsetenv("FAKE_BATON_HEALTH");
    unsetenv("FAKE_BATON_FAIL_WORKER");
    unsetenv("FAKE_BATON_DRAIN_S");
    absl::StatusOr<std::unique_ptr<ProcessSupervisor>> supervisor = ProcessSupervisor::Create();
    ASSERT_THAT(supervisor, IsOk());
    supervisor_ = *std::move(supervisor);
  }
  void TearDown() override {
    supervisor_.reset();
    std::filesystem::remove_all(dir_);
  }

  // The model directory's config.json: the shape of the generated `tiny` model (6 layers, 6 query
  // and 6 KV heads), which the launcher reads to check a multi-rank layout. No weights: the fake
  // workers load nothing.
  void WriteModelConfig() {
    std::ofstream(dir_ / "model" / "config.json") << R"({
      "architectures": ["LlamaForCausalLM"], "hidden_size": 288, "intermediate_size": 768,
      "num_hidden_layers": 6, "num_attention_heads": 6, "num_key_value_heads": 6,
      "head_dim": 48, "vocab_size": 32000, "max_position_embeddings": 2048,
      "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu",
      "torch_dtype": "float32", "bos_token_id": 0, "eos_token_id": 1})";
  }

  std::filesystem::path WriteConfig(const std::string& text,
                                    const std::string& name = "deployment.yaml") {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path) << "model: " << (dir_ / "model").string() << "\n" << text;
    return path;
  }

  // Starts `fake_baton serve <args>` with its output in files.
  pid_t StartServe(std::vector<std::string> args) {
    args.insert(args.begin(), {FAKE_BATON_PATH, "serve"});
    absl::StatusOr<pid_t> pid = supervisor_->Start({.name = "launcher",
                                                    .argv = args,
                                                    .stdout_path = dir_ / "serve.out",
                                                    .stderr_path = dir_ / "serve.err"});
    BATON_CHECK(pid.ok());
    return *pid;
  }

  // Polls `read` until `done` holds for its result; returns the last result.
  template <typename Read, typename Done>
  static auto PollUntil(Read read, Done done) {
    const absl::Time deadline = absl::Now() + kPatience;
    auto value = read();
    while (!done(value) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
      value = read();
    }
    return value;
  }

  // The launcher's first stdout line, once complete ("" if none within kPatience).
  std::string WaitForServingLine() {
    const std::string out = PollUntil([&] { return ReadFile(dir_ / "serve.out"); },
                                      [](const std::string& s) { return s.find('\n') != s.npos; });
    return out.substr(0, out.find('\n'));
  }

  std::string WaitForStderr(const std::string& text) {
    return PollUntil([&] { return ReadFile(dir_ / "serve.err"); },
                     [&](const std::string& s) { return s.find(text) != s.npos; });
  }

  // The pid of a child ("scheduler", "prefill worker 1") from the launcher's "started" line, or -1.
  pid_t ChildPid(const std::string& name) {
    const std::string line = absl::StrCat("baton: started ", name, " (pid ");
    const std::string err = WaitForStderr(line);
    const size_t at = err.find(line);
    return at == std::string::npos ? -1 : std::stoi(err.substr(at + line.size()));
  }

  // The pid of a child's restart number `restart` from the launcher's "restarted" line, or -1.
  pid_t RestartedPid(const std::string& name, int restart) {
    const std::string line = absl::StrCat("baton: restarted ", name, " (pid ");
    const std::string tail = absl::StrCat(", restart ", restart, ")");
    const std::string err = PollUntil([&] { return ReadFile(dir_ / "serve.err"); }, [&](const std::string& s) {
      return s.find(tail) != s.npos;
    });
    for (size_t at = err.find(line); at != std::string::npos; at = err.find(line, at + 1)) {
      const size_t end = err.find('\n', at);
      if (err.compare(end - tail.size(), tail.size(), tail) == 0) return std::stoi(err.substr(at + line.size()));
    }
    return -1;
  }

  // The effective config's path, from the launcher's log.
  std::filesystem::path EffectiveConfig() {
    const std::string line = "effective config in ";
    const std::string err = WaitForStderr(line);
    const size_t at = err.find(line);
    if (at == std::string::npos) return {};
    return err.substr(at + line.size(), err.find('\n', at) - at - line.size());
  }

  ChildExit WaitForLauncherExit() {
    std::optional<ChildExit> exit = supervisor_->WaitForExit(kPatience);
    BATON_CHECK(exit.has_value());
    return *exit;
  }

  std::filesystem::path dir_;
  std::unique_ptr<ProcessSupervisor> supervisor_;
};

TEST_F(ServeCommandTest, ServesUntilSigintThenStopsEveryChild) {
  const int port = FreePort();
  const pid_t launcher = StartServe(
      {"--config", WriteConfig("http_port: 0\nprefill: {instances: 2}\n").string(), "--grpc-port",
       std::to_string(port)});
  EXPECT_EQ(WaitForServingLine(),
            absl::StrCat("baton: serving model on 127.0.0.1:", port,
                         " (disaggregated: prefill 2 instances x (tp 1 x pp 1, cpu) + decode 1 "
                         "instance x (tp 1 x pp 1, cpu); no HTTP)"));
  std::vector<pid_t> children;
  for (const char* name :
       {"scheduler", "prefill worker 0", "prefill worker 1", "decode worker 0"}) {
    children.push_back(ChildPid(name));
    EXPECT_GT(children.back(), 0) << name;
    EXPECT_FALSE(ProcessGone(children.back())) << name;
  }
  const std::filesystem::path config_file = EffectiveConfig();
  EXPECT_TRUE(std::filesystem::exists(config_file));

  ASSERT_EQ(kill(launcher, SIGINT), 0);
  const ChildExit exit = WaitForLauncherExit();
  EXPECT_EQ(exit.exit_code, 0) << ReadFile(dir_ / "serve.err");
  EXPECT_THAT(ReadFile(dir_ / "serve.err"), HasSubstr("baton: SIGINT received; draining, then stopping"));
  for (pid_t child : children) EXPECT_TRUE(ProcessGone(child)) << "child " << child << " survived";
  EXPECT_FALSE(std::filesystem::exists(config_file.parent_path())) << "the run directory is removed";
}

TEST_F(ServeCommandTest, ASecondSigintCutsTheDrainShort) {
  setenv("FAKE_BATON_DRAIN_S", "60", 1);  // a scheduler that would drain for a minute
  const pid_t launcher = StartServe({"--model", (dir_ / "model").string(), "--grpc-port",
                                     std::to_string(FreePort()), "--port", "0", "--drain-timeout", "60"});
  WaitForServingLine();
  const pid_t scheduler = ChildPid("scheduler");
  const absl::Time start = absl::Now();
  ASSERT_EQ(kill(launcher, SIGINT), 0);
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_EQ(kill(launcher, SIGINT), 0);
  const ChildExit exit = WaitForLauncherExit();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(exit.exit_code, 0) << ReadFile(dir_ / "serve.err");
  EXPECT_THAT(ReadFile(dir_ / "serve.err"), HasSubstr("baton: SIGINT received again; stopping now"));
  EXPECT_TRUE(ProcessGone(scheduler));
}

TEST_F(ServeCommandTest, AWorkerDyingDuringStartUpStopsEverythingWithAClearError) {
  setenv("FAKE_BATON_HEALTH", "never", 1);
  setenv("FAKE_BATON_FAIL_WORKER", "decode-0", 1);
  StartServe({"--model", (dir_ / "model").string(), "--grpc-port", std::to_string(FreePort()),
              "--port", "0"});
  const ChildExit exit = WaitForLauncherExit();
  const std::string err = ReadFile(dir_ / "serve.err");
  EXPECT_EQ(exit.exit_code, 1) << err;
  EXPECT_THAT(err, ContainsRegex("baton serve: decode worker 0 \\(pid [0-9]+\\) exited with code 3 "
                                 "during start-up; stopping every process\n"));
  EXPECT_TRUE(ProcessGone(ChildPid("scheduler")));
  EXPECT_TRUE(ProcessGone(ChildPid("prefill worker 0")));
  EXPECT_EQ(ReadFile(dir_ / "serve.out"), "") << "never announced serving";
}

TEST_F(ServeCommandTest, StartUpTimesOutWithTheLastHealthAnswer) {
  setenv("FAKE_BATON_HEALTH", "never", 1);
  StartServe({"--config", WriteConfig("http_port: 0\n").string(), "--grpc-port",
              std::to_string(FreePort()), "--startup-timeout", "2"});
  const ChildExit exit = WaitForLauncherExit();
  const std::string err = ReadFile(dir_ / "serve.err");
  EXPECT_EQ(exit.exit_code, 1) << err;
  EXPECT_THAT(err, HasSubstr("not ready after 2s; last check: Health: STATUS_NOT_SERVING "
                             "(fake: never serving); stopping every process"));
  EXPECT_TRUE(ProcessGone(ChildPid("scheduler")));
  EXPECT_TRUE(ProcessGone(ChildPid("decode worker 0")));
}

TEST_F(ServeCommandTest, SigtermDuringStartUpStopsEverythingAndExitsZero) {
  setenv("FAKE_BATON_HEALTH", "never", 1);
  const pid_t launcher = StartServe({"--config", WriteConfig("http_port: 0\n").string(), "--grpc-port",
                                     std::to_string(FreePort())});
  const pid_t scheduler = ChildPid("scheduler");
  ASSERT_GT(scheduler, 0);
  ASSERT_EQ(kill(launcher, SIGTERM), 0);
  const ChildExit exit = WaitForLauncherExit();
  EXPECT_EQ(exit.exit_code, 0) << ReadFile(dir_ / "serve.err");
  EXPECT_THAT(ReadFile(dir_ / "serve.err"),
              HasSubstr("baton: interrupted by SIGTERM during start-up; stopping"));
  EXPECT_TRUE(ProcessGone(scheduler));
}

TEST_F(ServeCommandTest, AWorkerKilledAfterStartUpIsRestartedWithBackoff) {
  const pid_t launcher = StartServe({"--model", (dir_ / "model").string(), "--grpc-port",
                                     std::to_string(FreePort()), "--port", "0"});
  ASSERT_THAT(WaitForServingLine(), HasSubstr("baton: serving model"));
  const pid_t decode = ChildPid("decode worker 0");
  pid_t prefill = ChildPid("prefill worker 0");
  for (int restart = 1; restart <= 2; ++restart) {
    SCOPED_TRACE(absl::StrCat("restart ", restart));
    ASSERT_EQ(kill(prefill, SIGKILL), 0);
    // Killed at once after its restart: a crash loop, whose wait doubles.
    const std::string expected = absl::StrCat(
        "baton: prefill worker 0 (pid ", prefill, ") was killed by signal 9 (SIGKILL)\n"
        "baton: restarting prefill worker 0 in ", restart, "s\n");
    ASSERT_THAT(WaitForStderr(expected), HasSubstr(expected));
    const pid_t old = prefill;
    prefill = RestartedPid("prefill worker 0", restart);
    ASSERT_GT(prefill, 0) << ReadFile(dir_ / "serve.err");
    EXPECT_NE(prefill, old);
    EXPECT_FALSE(ProcessGone(prefill)) << "the new worker runs";
  }
  EXPECT_FALSE(ProcessGone(decode)) << "the other workers keep serving";
  EXPECT_EQ(supervisor_->num_running(), 1) << "the launcher keeps running";
  ASSERT_EQ(kill(launcher, SIGTERM), 0);
  EXPECT_EQ(WaitForLauncherExit().exit_code, 0);
  EXPECT_TRUE(ProcessGone(decode));
  EXPECT_TRUE(ProcessGone(prefill)) << "a restarted worker is stopped like the others";
}

TEST_F(ServeCommandTest, NoWorkerRestartLeavesADeadWorkerDown) {
  const pid_t launcher = StartServe({"--model", (dir_ / "model").string(), "--grpc-port",
                                     std::to_string(FreePort()), "--port", "0",
                                     "--no-worker-restart"});
  ASSERT_THAT(WaitForServingLine(), HasSubstr("baton: serving model"));
  const pid_t prefill = ChildPid("prefill worker 0");
  ASSERT_EQ(kill(prefill, SIGKILL), 0);
  const std::string expected =
      absl::StrCat("baton: prefill worker 0 (pid ", prefill, ") was killed by signal 9 (SIGKILL)\n");
  EXPECT_THAT(WaitForStderr(expected), HasSubstr(expected));
  absl::SleepFor(absl::Seconds(1.5));  // past the first restart's wait
  EXPECT_THAT(ReadFile(dir_ / "serve.err"), Not(HasSubstr("restart")));
  EXPECT_FALSE(ProcessGone(ChildPid("decode worker 0"))) << "the other workers keep serving";
  ASSERT_EQ(kill(launcher, SIGTERM), 0);
  EXPECT_EQ(WaitForLauncherExit().exit_code, 0);
  EXPECT_TRUE(ProcessGone(ChildPid("decode worker 0")));
}

TEST_F(ServeCommandTest, TheSchedulerDyingStopsTheDeployment) {
  StartServe({"--model", (dir_ / "model").string(), "--grpc-port", std::to_string(FreePort()),
              "--port", "0"});
  ASSERT_THAT(WaitForServingLine(), HasSubstr("baton: serving model"));
  ASSERT_EQ(kill(ChildPid("scheduler"), SIGKILL), 0);
  const ChildExit exit = WaitForLauncherExit();
  const std::string err = ReadFile(dir_ / "serve.err");
  EXPECT_EQ(exit.exit_code, 1) << err;
  EXPECT_THAT(err, HasSubstr("the scheduler is gone; stopping every process"));
  EXPECT_TRUE(ProcessGone(ChildPid("prefill worker 0")));
  EXPECT_TRUE(ProcessGone(ChildPid("decode worker 0")));
}

TEST_F(ServeCommandTest, ParallelFlagsLayOutEveryPhaseAndTheRanksAreLogged) {
  const int port = FreePort();
  const pid_t launcher = StartServe({"--model", (dir_ / "model").string(), "--grpc-port",
                                     std::to_string(port), "--port", "0",
                                     "--tensor-parallel-size", "2", "--pipeline-parallel-size", "2"});
  EXPECT_EQ(WaitForServingLine(),
            absl::StrCat("baton: serving model on 127.0.0.1:", port,
                         " (disaggregated: prefill 1 instance x (tp 2 x pp 2, cpu) + decode 1 "
                         "instance x (tp 2 x pp 2, cpu); no HTTP)"));
  const std::string ranks =
      "instance, tp 2 x pp 2: rank 0 layers 0-2, KV heads 0-2; rank 1 layers 0-2, KV heads 3-5; "
      "rank 2 layers 3-5, KV heads 0-2; rank 3 layers 3-5, KV heads 3-5\n";
  const std::string err = ReadFile(dir_ / "serve.err");
  EXPECT_THAT(err, HasSubstr("baton: prefill " + ranks));
  EXPECT_THAT(err, HasSubstr("baton: decode " + ranks));
  ASSERT_EQ(kill(launcher, SIGTERM), 0);
  EXPECT_EQ(WaitForLauncherExit().exit_code, 0);
}

TEST_F(ServeCommandTest, AConfigLayoutWithAnExplicitStageSplitIsLogged) {
  const int port = FreePort();
  const pid_t launcher = StartServe(
      {"--config",
       WriteConfig("http_port: 0\nmode: colocated\ncolocated: {pp: 2, pipeline_stage_layers: [4, 2]}\n")
           .string(),
       "--grpc-port", std::to_string(port)});
  EXPECT_THAT(WaitForServingLine(),
              HasSubstr("(colocated: colocated 1 instance x (tp 1 x pp 2 layers 4+2, cpu); no HTTP)"));
  EXPECT_THAT(ReadFile(dir_ / "serve.err"),
              HasSubstr("baton: colocated instance, tp 1 x pp 2 layers 4+2: rank 0 layers 0-3, KV "
                        "heads 0-5; rank 1 layers 4-5, KV heads 0-5\n"));
  ASSERT_EQ(kill(launcher, SIGTERM), 0);
  EXPECT_EQ(WaitForLauncherExit().exit_code, 0);
}

TEST_F(ServeCommandTest, BadConfigurationExitsTwoNamingTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--config", WriteConfig("prefill: {tp: 0}\n").string()},
       "deployment.yaml: prefill.tp: must be >= 1, got 0"},
      {{"--config", (dir_ / "missing.yaml").string()}, "missing.yaml: no such file"},
      {{"--model", (dir_ / "no-such-model").string()}, "no-such-model is not a directory"},
      {{"--model", (dir_ / "model").string(), "--grpc-port", "65535"},
       "prefill.base_port: moving the scheduler to port 65535"},
      {{"--model", (dir_ / "model").string(), "--tensor-parallel-size", "0"},
       "baton serve: --tensor-parallel-size: must be >= 1, got 0\n"},
      {{"--model", (dir_ / "model").string(), "--pipeline-parallel-size", "-2"},
       "baton serve: --pipeline-parallel-size: must be >= 1, got -2\n"},
      {{"--model", (dir_ / "model").string(), "--tensor-parallel-size", "4"},
       "baton serve: prefill: tp 4 x pp 1 does not fit the model: shard: tp_size 4 does not divide "
       "num_heads 6"},
      {{"--model", (dir_ / "model").string(), "--pipeline-parallel-size", "7"},
       "baton serve: prefill: tp 1 x pp 7 does not fit the model: shard: 7 pipeline stages for 6 "
       "layers\n"},
      {{"--config", WriteConfig("decode: {pp: 2, pipeline_stage_layers: [4, 4]}\n", "split.yaml").string()},
       "baton serve: decode: tp 1 x pp 2 layers 4+4 does not fit the model: shard: layer split [4, "
       "4] sums to 8, the model has 6 layers\n"},
      {{"--config", WriteConfig("", "plain.yaml").string(), "--tensor-parallel-size", "2"},
       "with --config, set tp and pp in each phase's section\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    StartServe(c.args);
    const ChildExit exit = WaitForLauncherExit();
    EXPECT_EQ(exit.exit_code, 2);
    const std::string err = ReadFile(dir_ / "serve.err");
    EXPECT_THAT(err, HasSubstr(c.message));
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "one line: " << err;
  }
}

TEST_F(ServeCommandTest, ASecondLauncherOfTheSameDeploymentIsRefused) {
  const std::vector<std::string> args = {"--model", (dir_ / "model").string(), "--grpc-port",
                                         std::to_string(FreePort()), "--port", "0"};
  const pid_t first = StartServe(args);
  ASSERT_THAT(WaitForServingLine(), HasSubstr("baton: serving model"));
  const std::filesystem::path first_err = dir_ / "first.err";
  std::filesystem::rename(dir_ / "serve.err", first_err);
  StartServe(args);
  const ChildExit second = WaitForLauncherExit();
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(ReadFile(dir_ / "serve.err"),
              HasSubstr(absl::StrCat(" is in use: another baton serve (pid ", first, ") runs this deployment")));
  ASSERT_EQ(kill(first, SIGINT), 0);
  EXPECT_EQ(WaitForLauncherExit().exit_code, 0);
}

TEST_F(ServeCommandTest, NoChildOutlivesAKilledLauncherAndTheNextStartCleansUp) {
  // Orphans are reparented to this process, so their end can be waited for.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::vector<std::string> args = {"--model", (dir_ / "model").string(), "--grpc-port",
                                         std::to_string(FreePort()), "--port", "0"};
  const pid_t launcher = StartServe(args);
  ASSERT_THAT(WaitForServingLine(), HasSubstr("baton: serving model"));
  std::vector<pid_t> workers;
  for (const char* name : {"prefill worker 0", "decode worker 0"}) workers.push_back(ChildPid(name));
  const pid_t scheduler = ChildPid("scheduler");
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  EXPECT_EQ(WaitForLauncherExit().signal, SIGKILL);
  for (pid_t child : workers) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child " << child;
  }
  // The scheduler gets SIGTERM instead, to end its clients' streams with an error; it then exits.
  int status = 0;
  ASSERT_EQ(waitpid(scheduler, &status, 0), scheduler);
  EXPECT_TRUE((WIFEXITED(status) && WEXITSTATUS(status) == 0) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM))
      << "scheduler status " << status;
  prctl(PR_SET_CHILD_SUBREAPER, 0);

  // The run directory outlived the launcher; the next start of the deployment empties and reuses
  // it, and a clean stop removes it.
  const std::filesystem::path run_dir = EffectiveConfig().parent_path();
  ASSERT_TRUE(std::filesystem::exists(run_dir / "config.yaml"));
  ASSERT_TRUE(std::filesystem::exists(run_dir / "deployment-secret"));
  std::filesystem::remove(dir_ / "serve.out");
  const pid_t again = StartServe(args);
  ASSERT_THAT(WaitForServingLine(), HasSubstr("baton: serving model"));
  EXPECT_THAT(ReadFile(dir_ / "serve.err"),
              HasSubstr(absl::StrCat("baton: removed what a killed launcher left in ", run_dir.string())));
  ASSERT_EQ(kill(again, SIGINT), 0);
  EXPECT_EQ(WaitForLauncherExit().exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(run_dir));
}

}  // namespace
}  // namespace baton::runtime
