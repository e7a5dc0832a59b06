"""`baton serve`'s vLLM scheduler flags reach every phase of the effective config, and the deployment
serves with them: --max-num-seqs, --max-num-batched-tokens, --enable-chunked-prefill (colocated),
--enforce-eager, --block-size, and --ssl-certfile/--ssl-keyfile as --tls-cert/--tls-key's names."""

import json
import urllib.request
from pathlib import Path

import pytest
import yaml

from serving_fixtures import DeploymentFactory

MODEL = Path(__file__).resolve().parents[2] / "models" / "kjv-4m"


@pytest.mark.engine
def test_vllm_scheduler_flags_reach_every_phase(baton_binary, tmp_path):
    factory = DeploymentFactory(baton_binary, MODEL, tmp_path)
    try:
        deployment = factory.start("flags", mode="colocated", http=True, serve_args=(
            "--max-num-seqs", "7", "--max-num-batched-tokens", "96", "--enable-chunked-prefill",
            "--enforce-eager", "--block-size", "32"))
        config = yaml.safe_load(deployment.effective_config.read_text())
        assert config["block_size"] == 32
        phase = config["colocated"]
        assert (phase["max_num_seqs"], phase["max_num_batched_tokens"]) == (7, 96)
        assert phase["chunked_prefill"] is True and phase["enforce_eager"] is True
        # A prompt longer than a step's 96 tokens is prefilled in chunks, and answered.
        body = {"prompt": "And the king said unto the prophet, " * 20, "max_tokens": 4, "temperature": 0}
        request = urllib.request.Request(f"http://127.0.0.1:{deployment.http_port}/v1/completions",
                                         data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert answer["usage"]["prompt_tokens"] > 96 and answer["usage"]["completion_tokens"] == 4
    finally:
        problems = factory.stop_all()
    assert not problems, "\n".join(problems)
