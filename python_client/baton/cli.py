"""`python -m baton`: a command line over baton.Client.

    python -m baton generate --server HOST:PORT --prompt TEXT [--max-tokens N] [--temperature T]
        [--top-k K] [--top-p P] [--seed S] [--stop STR]... [--stop-token-id ID]... [--ignore-eos]
        [--logprobs N] [--model NAME] [--request-id ID] [--timeout SECONDS] [--json]
    python -m baton generate --server HOST:PORT --prompt-ids 0,6330,310 ...
    python -m baton health --server HOST:PORT        # exit 0 only when SERVING
    python -m baton model-info --server HOST:PORT    # one JSON object

`generate` streams the text to stdout as it arrives (then a newline); with --json it prints one JSON
object per token ({"token_id", "text"[, "logprobs"]}; a chunk's text rides on its last token, as in
`baton generate --server --json`) and a summary object last.
Exit codes: 0 on success; 2 for a bad request (the server's INVALID_ARGUMENT) or bad arguments; 1 for
any other failure (server unreachable, worker down, deadline passed). Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Sequence, TextIO

import grpc

from baton.client import DEFAULT_TIMEOUT_S, Client
from baton.errors import BatonError
from baton.messages import Chunk

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _token_ids(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m baton", description="Baton client")
    commands = parser.add_subparsers(dest="command", required=True)

    def with_server(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--server", required=True, help="host:port of a Baton scheduler")
        sub.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                         help="seconds before the call gives up (default %(default)s)")
        return sub

    gen = with_server("generate", "stream a generation to stdout")
    prompt = gen.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="prompt text")
    prompt.add_argument("--prompt-ids", type=_token_ids, help="prompt as comma-separated token ids")
    gen.add_argument("--max-tokens", type=int, default=128, help="tokens to generate (default %(default)s)")
    gen.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (the default)")
    gen.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (0 = off)")
    gen.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass in (0, 1]")
    gen.add_argument("--seed", type=int, default=None, help="sampling seed (default: the server's)")
    gen.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    gen.add_argument("--stop-token-id", type=int, action="append", default=[],
                     help="stop token id (repeatable)")
    gen.add_argument("--ignore-eos", action="store_true", help="keep generating past EOS")
    gen.add_argument("--presence-penalty", type=float, default=0.0,
                     help="in [-2, 2]: minus this once a token was generated")
    gen.add_argument("--frequency-penalty", type=float, default=0.0,
                     help="in [-2, 2]: minus this per time a token was generated")
    gen.add_argument("--repetition-penalty", type=float, default=1.0,
                     help="> 0, on prompt and generated tokens (1 = off)")
    gen.add_argument("--min-p", type=float, default=0.0,
                     help="keep tokens at least this times as likely as the top one (0 = off)")
    gen.add_argument("--min-tokens", type=int, default=0,
                     help="no EOS, stop token or stop string before this many tokens")
    gen.add_argument("--logit-bias", type=_logit_bias, action="append", default=[],
                     metavar="ID=BIAS", help="add BIAS in [-100, 100] to token ID's logit (repeatable)")
    gen.add_argument("--logprobs", type=int, default=None,
                     help="log-probabilities per token (--json): the top N, then the sampled token's")
    gen.add_argument("--model", default=None, help="model name (default: the served one)")
    gen.add_argument("--request-id", default=None, help="request id (default: assigned by the server)")
    gen.add_argument("--json", action="store_true", help="one JSON object per token, then a summary")

    with_server("health", "print the server's health; exit 0 only when SERVING")
    with_server("model-info", "print the served model's description as JSON")
    return parser


def _logit_bias(text: str) -> tuple[int, float]:
    token_id, sep, bias = text.partition("=")
    try:
        if not sep:
            raise ValueError
        return int(token_id), float(bias)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected ID=BIAS, got {text!r}") from None


def _print_chunk_json(chunk: Chunk, out: TextIO) -> None:
    for i, token_id in enumerate(chunk.token_ids):
        line = {"token_id": token_id, "text": chunk.text if i + 1 == len(chunk.token_ids) else ""}
        if i < len(chunk.logprobs):
            line["logprobs"] = [{"token_id": lp.token_id, "logprob": lp.logprob} for lp in chunk.logprobs[i]]
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
    if chunk.finish_reason is not None:
        summary = {"request_id": chunk.request_id, "finish_reason": chunk.finish_reason,
                   "prompt_token_ids": list(chunk.prompt_token_ids),
                   "num_prompt_tokens": chunk.num_prompt_tokens,
                   "num_generated_tokens": chunk.num_generated_tokens}
        out.write(json.dumps(summary) + "\n")


def _generate(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    stream = client.generate(
        prompt=args.prompt, token_ids=args.prompt_ids, max_tokens=args.max_tokens,
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
        stop=args.stop, stop_token_ids=args.stop_token_id, ignore_eos=args.ignore_eos,
        logprobs=args.logprobs, request_id=args.request_id, model=args.model,
        presence_penalty=args.presence_penalty, frequency_penalty=args.frequency_penalty,
        repetition_penalty=args.repetition_penalty, min_p=args.min_p, min_tokens=args.min_tokens,
        logit_bias=dict(args.logit_bias))
    with stream:
        for chunk in stream:
            if args.json:
                _print_chunk_json(chunk, out)
            else:
                out.write(chunk.text)
            out.flush()
    if not args.json:
        out.write("\n")
        out.flush()
    return 0


def _health(client: Client, out: TextIO) -> int:
    health = client.health()
    out.write(health.status + "\n")
    for problem in health.problems:
        out.write(f"  {problem}\n")
    return 0 if health.serving else EXIT_FAILURE


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Runs one command; returns the exit code (argparse exits 2 itself on bad arguments)."""
    args = _parser().parse_args(argv)
    out = out or sys.stdout
    try:
        with Client(args.server, timeout=args.timeout) as client:
            if args.command == "generate":
                return _generate(client, args, out)
            if args.command == "health":
                return _health(client, out)
            out.write(json.dumps(dataclasses.asdict(client.model_info())) + "\n")
            return 0
    except BatonError as error:
        sys.stderr.write(f"baton: {error}\n")
        return EXIT_USAGE if error.code == grpc.StatusCode.INVALID_ARGUMENT else EXIT_FAILURE
    except KeyboardInterrupt:
        sys.stderr.write("baton: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, without a second error at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILURE
