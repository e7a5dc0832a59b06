"""Structured outputs through the official `openai` client against a live `baton serve` of the
embedded default model (models/kjv-4m, a trained model): `chat.completions.parse` with a pydantic
model, a hundred sampled answers under a JSON schema, regex and choice constraints, vLLM's field
spellings, and the 400s for what cannot be compiled, on colocated and disaggregated deployments.
Every answer here is drawn at temperature 1, so that only the grammar keeps it in shape."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

import pytest

openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")

from serving_fixtures import DeploymentFactory  # noqa: E402

MODEL = Path(__file__).resolve().parents[2] / "models" / "kjv-4m"
QUESTION = [{"role": "user", "content": "Which verse speaks of the shepherd? Answer in JSON."}]

VERSE_SCHEMA = {
    "type": "object",
    "properties": {
        "book": {"enum": ["Genesis", "Exodus", "Psalms", "John"]},
        "chapter": {"type": "integer", "minimum": 1, "maximum": 150},
        "words": {"type": "string", "maxLength": 40},
        "amen": {"type": "boolean"},
    },
    "required": ["book", "chapter", "words", "amen"],
    "additionalProperties": False,
}


class Verse(pydantic.BaseModel):
    book: Literal["Genesis", "Exodus", "Psalms", "John"]
    chapter: int = pydantic.Field(ge=1, le=150)
    words: str = pydantic.Field(max_length=40)


def valid_verse(value: dict) -> bool:
    return (set(value) == {"book", "chapter", "words", "amen"} and value["book"] in VERSE_SCHEMA["properties"]["book"]["enum"]
            and isinstance(value["chapter"], int) and 1 <= value["chapter"] <= 150
            and isinstance(value["words"], str) and len(value["words"]) <= 40 and isinstance(value["amen"], bool))


@pytest.fixture(scope="module", params=["colocated", "disaggregated"])
def deployment(request, baton_binary, tmp_path_factory):
    factory = DeploymentFactory(baton_binary, MODEL, tmp_path_factory.mktemp(f"structured-{request.param}"))
    yield factory.start(f"structured-{request.param}", mode=request.param, http=True)
    problems = factory.stop_all()
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def oai(deployment):
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{deployment.http_port}/v1", api_key="unused",
                           timeout=120, max_retries=0)
    yield client
    client.close()


@pytest.mark.engine
def test_parse_with_a_pydantic_model(oai):
    completion = oai.chat.completions.parse(model="kjv-4m", messages=QUESTION, response_format=Verse,
                                            temperature=1, seed=3, max_tokens=200)
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "stop", message.content
    assert isinstance(message.parsed, Verse), message.content


@pytest.mark.engine
def test_a_hundred_sampled_answers_all_follow_the_schema(oai):
    response_format = {"type": "json_schema", "json_schema": {"name": "verse", "schema": VERSE_SCHEMA, "strict": True}}

    def ask(seed: int):
        return oai.chat.completions.create(model="kjv-4m", messages=QUESTION, response_format=response_format,
                                           temperature=1, seed=seed, max_tokens=200)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(100)))
    texts = [answer.choices[0].message.content for answer in answers]
    assert all(answer.choices[0].finish_reason == "stop" for answer in answers), texts
    values = [json.loads(text) for text in texts]
    assert all(valid_verse(value) for value in values), [t for t, v in zip(texts, values) if not valid_verse(v)]
    assert len({text for text in texts}) > 50  # sampled, not one answer a hundred times


@pytest.mark.engine
def test_regex_and_choice_constrain_completions_and_chat(oai):
    pattern = r"(Genesis|Exodus|Psalms) [1-9][0-9]?:[1-9][0-9]?"
    for seed in range(10):
        text = oai.completions.create(model="kjv-4m", prompt="And the LORD said", temperature=1, seed=seed,
                                      max_tokens=20, extra_body={"structured_outputs": {"regex": pattern}}
                                      ).choices[0].text
        assert re.fullmatch(pattern, text), text
    choices = ["the shepherd", "the king", "the prophet"]
    for seed in range(10):
        answer = oai.chat.completions.create(model="kjv-4m", messages=QUESTION, temperature=1, seed=seed,
                                             max_tokens=20, extra_body={"guided_choice": choices})
        assert answer.choices[0].message.content in choices
        assert answer.choices[0].finish_reason == "stop"


@pytest.mark.engine
def test_streamed_json_object_parses(oai):
    stream = oai.chat.completions.create(model="kjv-4m", messages=QUESTION, temperature=1, seed=11, max_tokens=300,
                                         response_format={"type": "json_object"}, stream=True)
    chunks = list(stream)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    finish = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices and chunk.choices[0].finish_reason]
    if finish == ["stop"]:
        assert isinstance(json.loads(text), dict), text
    else:  # ran out of tokens: what came is still a prefix of an object
        assert finish == ["length"] and text.lstrip().startswith("{"), text


@pytest.mark.engine
def test_what_cannot_be_compiled_is_a_400_naming_it(oai):
    cases = [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "strin"}}}}}}, "json_schema"),
        ({"structured_outputs": {"regex": "(unclosed"}}, "regex"),
        ({"guided_grammar": "root ::= \"a"}, "grammar"),
        ({"guided_choice": []}, "guided_choice"),
        ({"guided_regex": "a+", "guided_choice": ["a"]}, "both constrain"),
        ({"response_format": {"type": "yaml"}}, "unknown type"),
        ({"structured_outputs": {"structural_tag": "{}"}}, "structural_tag"),
    ]
    for body, words in cases:
        with pytest.raises(openai.BadRequestError) as error:
            oai.chat.completions.create(model="kjv-4m", messages=QUESTION, max_tokens=8, extra_body=body)
        assert words in str(error.value), (body, str(error.value))


@pytest.mark.engine
def test_the_grpc_api_takes_the_same_constraints(deployment):
    import baton

    with baton.Client(deployment.address, timeout=120) as client:
        for seed in range(5):
            answer = client.complete(prompt="The book of", max_tokens=400, temperature=1.0, seed=seed,
                                     structured_outputs={"json": VERSE_SCHEMA})
            assert answer.finish_reason == "stop" and valid_verse(json.loads(answer.text)), answer.text
        answer = client.complete(prompt="Who spoke?", max_tokens=10, temperature=1.0, seed=1,
                                 structured_outputs={"choice": ["Moses", "Aaron"]})
        assert answer.text in ("Moses", "Aaron")
        with pytest.raises(baton.BatonError) as error:
            client.complete(prompt="x", max_tokens=4, structured_outputs={"regex": "(a"})
        assert "INVALID_ARGUMENT" in str(error.value) and "regex" in str(error.value)
