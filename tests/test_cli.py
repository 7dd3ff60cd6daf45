"""Command-line behaviour: --help, and bad input as one `error:` line with exit status 2."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


def run(*args, cwd=REPO_ROOT):
    return subprocess.run([sys.executable, "-m", "train.run", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


#: lines TensorFlow's runtime writes itself once imported (e.g. "no CUDA driver") before its
#: log level applies: not the project's output
TF_RUNTIME_LOG = re.compile(r"^(WARNING: All log messages before absl|[IWE]\d{4} )")


def assert_one_line_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines()
             if line.strip() and not TF_RUNTIME_LOG.match(line)]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_help_lists_datasets_models_and_examples():
    result = run("--help")
    assert result.returncode == 0
    for text in ("--dataset", "bnc", "--model", "--resume", "--mode", "TDLM format"):
        assert text in result.stdout


#: checks each command's --help in turn in one process; prints the first that imported
#: TensorFlow (once imported, it would stay in sys.modules for the commands after it)
HELP_WITHOUT_TENSORFLOW = """
import contextlib, io, runpy, sys
for module in sys.argv[1:]:
    sys.argv = [module, "--help"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        runpy.run_module(module, run_name="__main__")
    if "tensorflow" in sys.modules:
        print(module)
        break
"""


def test_no_command_starts_tensorflow_for_its_help():
    """--help answers at once, without TensorFlow's start-up and its log lines: every
    command (a module of train/, evaluate/ or benchmarks/ that runs as ``__main__``)
    imports TensorFlow only after its flags are parsed."""
    modules = sorted(f"{path.parent.name}.{path.stem}"
                     for folder in ("train", "evaluate", "benchmarks")
                     for path in (REPO_ROOT / folder).glob("*.py")
                     if 'if __name__ == "__main__":' in path.read_text())
    assert {"train.run", "evaluate.knowledge_base", "benchmarks.run"} <= set(modules)
    result = subprocess.run([sys.executable, "-c", HELP_WITHOUT_TENSORFLOW, *modules],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "", f"{result.stdout.strip()} --help imports TensorFlow"


def test_missing_dataset_exits_2_naming_path_format_and_source(tmp_path):
    result = run("--dataset", "bnc", "--data-dir", str(tmp_path), "--cache-dir", str(tmp_path))
    assert_one_line_error(result, str(tmp_path / "bnc" / "train.txt"),
                          "one document per line", "github.com/jhlau", "--data-dir")


def test_missing_dataset_via_environment_variable(tmp_path):
    env_dir = tmp_path / "corpora"
    result = subprocess.run([sys.executable, "-m", "train.run", "--dataset", "imdb"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                            env={"TCNLM_DATA_DIR": str(env_dir), "PATH": "/usr/bin:/bin"})
    assert_one_line_error(result, str(env_dir / "imdb" / "train.txt"))


@pytest.mark.parametrize("args,fragment", [
    (["--tie-embeddings"], "--decoder softmax"),
    (["--decoder", "softmax", "--cutoffs", "100"], "--cutoffs"),
    (["--knowledge-base", "wordnet"], "it is an option of --decoder sdlm"),
    (["--model", "sdlm", "--decoder", "mos"], "--model lstm --decoder"),
    (["--decoder", "sdlm", "--num-bases", "0"], "--num-bases must be a positive integer"),
    (["--epochs", "0"], "--epochs"),
    (["--dropout", "1.5"], "--dropout"),
    (["--resume"], "--run-name"),
    (["--synthetic", "no_such_field=3"], "no_such_field"),
    (["--synthetic", "train_docs=abc"], "train_docs must be an integer"),
    (["--synthetic", "doc_topic_alpha=inf"], "doc_topic_alpha must be a finite number"),
    (["--seed", "-1"], "--seed must be in [0, 2^32)"),
    (["--log-every", "0"], "--log-every must be >= 1"),
    (["--dataset", "bnc", "--synthetic", "seed=3"], "--dataset synthetic"),
    (["--model", "tcnlm", "--topic-word-scale", "0"], "--topic-word-scale"),
    (["--cutoffs", "5,3"], "strictly increasing"),
    (["--cutoffs", "0,3"], "positive"),
    (["--cutoffs", "100,5000", "--max-steps", "1"], "below the LM vocabulary size"),
    (["--dataset", "peoples_daily", "--model", "sdlm"], "needs HowNet's Chinese sememes"),
    (["--dataset", "peoples_daily", "--decoder", "sdlm", "--knowledge-base", "wordnet"],
     "--knowledge-base hownet:FILE"),
])
def test_invalid_flags_are_rejected_up_front(tmp_path, args, fragment):
    result = run(*args, "--runs-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path))
    assert_one_line_error(result, fragment)


def test_resume_without_checkpoint_is_an_error(tmp_path):
    result = run("--resume", "--run-name", "nothing", "--runs-dir", str(tmp_path))
    assert_one_line_error(result, "nothing to resume", str(tmp_path / "nothing"))


def test_resume_refuses_to_change_the_model(tmp_path):
    run_dir = tmp_path / "runs" / "x"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "checkpoint").write_text("")
    (run_dir / "config.json").write_text("{}")
    result = run("--resume", "--run-name", "x", "--runs-dir", str(tmp_path / "runs"),
                 "--hidden-size", "10")
    assert_one_line_error(result, "--hidden-size cannot change")


def test_config_of_an_earlier_version_keeps_its_own_model_options():
    """Runs written before model options had their own dict stored every topic setting, the
    LSTM's too: they load with their own model's options only and still validate."""
    from tcnlm_tf.config import RunConfig
    old = {"model": {"model": "lstm", "num_topics": 50, "num_factors": None,
                     "ntm_hidden_units": [256, 256]}}
    config = RunConfig.from_dict(old)
    config.validate()
    assert config.model.options == {}
    tcnlm = RunConfig.from_dict({"model": {"model": "tcnlm", "num_topics": 7}})
    tcnlm.validate()
    assert tcnlm.model.option("num_topics") == 7 and tcnlm.model.option("num_factors") is None


def test_settings_added_by_issue_23_keep_what_an_earlier_run_was_trained_with():
    """A config.json saved before TDLM's dropout placement, LCLM's fusion and the topic
    vocabulary's frequent-word rule existed loads with the behaviour it was trained with; a
    new run gets the authors' choices; Topic-RNN's KL weighting was always saved."""
    from layers.topic_attention import DROPOUT_PLACEMENTS
    from tcnlm_tf.config import RunConfig
    from tcnlm_tf.models.registry import LCLM_FUSIONS, TOPIC_DROPOUT_PLACEMENTS
    from tcnlm_tf.models.lclm import FUSIONS
    from train.run import build_parser, config_from_args
    assert TOPIC_DROPOUT_PLACEMENTS == DROPOUT_PLACEMENTS and LCLM_FUSIONS == FUSIONS
    old = {"data": {"dataset": "synthetic"}}
    expected = {"tdlm": ("topic_dropout_on", "document", "embeddings"),
                "lclm": ("lclm_fusion", "output", "late"),
                "topic_rnn": ("ntm_weighting", "sentence", "document")}
    for model, (option, before, now) in expected.items():
        saved = {**old, "model": {"model": model, "options": {}}}
        if model == "topic_rnn":             # saved by every run since it existed
            saved["model"].update(decoder="softmax", options={"ntm_weighting": "sentence"})
        loaded = RunConfig.from_dict(saved)
        loaded.validate()
        assert loaded.model.option(option) == before
        assert loaded.data.topic_top_among == "lm_vocab"
        fresh = config_from_args(build_parser().parse_args(["--model", model]))
        assert fresh.model.options[option] == now and fresh.data.topic_top_among == "types"
        again = RunConfig.from_dict(fresh.to_dict())
        assert again.model.option(option) == now and again.data.topic_top_among == "types"


def test_lr_is_the_learning_rate_and_no_prefix_of_a_flag_is_accepted():
    """--lr once was taken as a prefix of --lr-decay, leaving the learning rate unchanged."""
    from train.run import build_parser, config_from_args
    args = build_parser().parse_args(["--lr", "0.01"])
    assert config_from_args(args).train.learning_rate == 0.01
    assert config_from_args(args).train.lr_decay == 0.5
    for prefix in (["--lr-dec", "0.5"], ["--learning", "0.1"], ["--epoch", "3"]):
        with pytest.raises(SystemExit) as stop:
            build_parser().parse_args(prefix)
        assert stop.value.code == 2


def test_runs_dir_defaults_to_the_environment_variable(monkeypatch, tmp_path):
    """$TCNLM_RUNS_DIR is the default --runs-dir of train.run and evaluate.compare (long runs
    kept outside a checkout); without it, ./runs; a given --runs-dir wins."""
    from evaluate.compare import build_parser as compare_parser
    from train.run import build_parser as train_parser

    monkeypatch.delenv("TCNLM_RUNS_DIR", raising=False)
    assert train_parser().parse_args([]).runs_dir == Path("runs")
    monkeypatch.setenv("TCNLM_RUNS_DIR", str(tmp_path / "scratch_runs"))
    for parser in (train_parser(), compare_parser()):
        assert parser.parse_args([]).runs_dir == tmp_path / "scratch_runs"
        assert parser.parse_args(["--runs-dir", "elsewhere"]).runs_dir == Path("elsewhere")
        assert "scratch_runs" in parser.format_help()        # --help names the default


@pytest.mark.parametrize("flags, fragment", [
    (["--hidden-size", "99999999999999999999"], "--hidden-size 99999999999999999999 is too large"),
    (["--seq-len", "3000000000"], "--seq-len 3000000000 is too large"),
    (["--model", "tcnlm", "--num-topics", "99999999999999999999"], "--num-topics"),
    (["--decoder", "adaptive", "--cutoffs", "10,99999999999999999999"], "--cutoffs"),
    (["--topic-min-docs", "-1"], "--topic-min-docs must be >= 1"),
    (["--max-doc-tokens", "0"], "--max-doc-tokens must be >= 1"),
    (["--patience", "0"], "--patience must be >= 1"),
    # the synthetic corpus reads no files: a --data-dir given without --dataset was ignored
    (["--data-dir", "data"], "--data-dir is where the corpus of --dataset"),
])
def test_out_of_range_integer_settings_are_one_line_errors(flags, fragment, tmp_path, capsys):
    """Every numeric train.run option refuses an out-of-range value with one line: sizes
    past int32 would reach TensorFlow as overflows, and a negative or zero count would be
    taken."""
    from train.run import main

    with pytest.raises(SystemExit) as exit_info:
        main(flags + ["--runs-dir", str(tmp_path / "runs"), "--cache-dir",
                      str(tmp_path / "cache")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and fragment in err and "\n" not in err
    assert not (tmp_path / "runs").exists()       # refused before anything was written
