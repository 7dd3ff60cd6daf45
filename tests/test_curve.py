"""``evaluate.curve``: a run's validation perplexity and learning rate per epoch, printed and
drawn, from a hand-made ``metrics.json`` (no training), beside a reference curve in
``benchmarks.torch_reference_lm``'s JSON lines; one-line errors without epochs and for a
reference curve that is not one."""
import json

import pytest

from evaluate.curve import main

#: as the trainer records them: each epoch's rate after its decision (epoch 3 did not improve,
#: so epoch 4 trains at half the rate)
EPOCHS = [{"epoch": 1, "valid_perplexity": 542.35, "learning_rate": 20.0},
          {"epoch": 2, "valid_perplexity": 330.41, "learning_rate": 20.0},
          {"epoch": 3, "valid_perplexity": 331.0, "learning_rate": 10.0},
          {"epoch": 4, "valid_perplexity": 300.0, "learning_rate": 10.0}]


def write_run(directory, epochs=EPOCHS, learning_rate=20.0):
    (directory / "metrics.json").write_text(json.dumps({"epochs": epochs}))
    (directory / "config.json").write_text(json.dumps({"train": {"learning_rate":
                                                                 learning_rate}}))


def test_the_curve_is_printed_and_drawn_with_the_rate_each_epoch_trained_at(tmp_path, capsys):
    write_run(tmp_path)
    rates = [e["learning_rate"] for e in main(["--run", str(tmp_path), "--reference",
                                                "105.35"])]
    assert rates == [20.0, 20.0, 20.0, 10.0]
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["epoch 1: valid perplexity 542.35, learning rate 20",
                       "epoch 2: valid perplexity 330.41, learning rate 20",
                       "epoch 3: valid perplexity 331.00, learning rate 20",
                       "epoch 4: valid perplexity 300.00, learning rate 10"]
    png = (tmp_path / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    main(["--run", str(tmp_path), "--output", str(tmp_path / "plots" / "c.png")])
    assert (tmp_path / "plots" / "c.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("metrics, message", [
    (None, "has no metrics.json or config.json"),
    ({"epochs": []}, "lists no finished epoch yet"),
    ({"epochs": EPOCHS, "config": {}}, "gives no train.learning_rate"),
    ({"epochs": EPOCHS, "config": "{not json"}, "cannot read"),
])
def test_a_run_without_epochs_is_a_one_line_error(tmp_path, capsys, metrics, message):
    if metrics is not None:
        write_run(tmp_path, metrics["epochs"])
        if "config" in metrics:
            config = metrics["config"]
            (tmp_path / "config.json").write_text(config if isinstance(config, str)
                                                  else json.dumps(config))
    with pytest.raises(SystemExit) as exit_info:
        main(["--run", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "learning_curve.png").exists()


REFERENCE = [{"vocab": 9, "lr": "20.0"},                       # the header: flags as text
             {"epoch": 1, "lr": 20.0, "valid_ppl": 439.12, "valid_ppl_exact": 439.37},
             {"epoch": 2, "lr": 20.0, "valid_ppl": 290.61, "valid_ppl_exact": 290.76},
             {"test_ppl": 250.0, "best_valid_ppl": 290.61, "epochs": 2}]


def test_a_reference_curve_is_drawn_and_each_shared_epoch_gets_its_ratio(tmp_path, capsys):
    write_run(tmp_path)
    (tmp_path / "ref.jsonl").write_text("\n".join(json.dumps(r) for r in REFERENCE) + "\n")
    main(["--run", str(tmp_path), "--output", str(tmp_path / "plain.png")])
    capsys.readouterr()
    main(["--run", str(tmp_path), "--reference-curve", str(tmp_path / "ref.jsonl")])
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        f"epoch 1: valid perplexity 542.35, learning rate 20; reference 439.12 "
        f"(ratio {542.35 / 439.12:.3f})",
        f"epoch 2: valid perplexity 330.41, learning rate 20; reference 290.61 "
        f"(ratio {330.41 / 290.61:.3f})",
        "epoch 3: valid perplexity 331.00, learning rate 20"]
    png = (tmp_path / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and png != (tmp_path / "plain.png").read_bytes()


@pytest.mark.parametrize("content, message", [
    (None, "cannot read --reference-curve"),
    ("not json\n", "is not JSON lines"),
    (json.dumps({"test_ppl": 1.0}) + "\n", "has no epoch line"),
    (json.dumps({"epoch": 1, "valid_ppl": "439", "lr": 20.0}) + "\n", "has no epoch line"),
])
def test_a_bad_reference_curve_is_a_one_line_error(tmp_path, capsys, content, message):
    write_run(tmp_path)
    if content is not None:
        (tmp_path / "ref.jsonl").write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        main(["--run", str(tmp_path), "--reference-curve", str(tmp_path / "ref.jsonl")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "learning_curve.png").exists()
