"""The cost model and `pubsub-emu calibrate`."""
import yaml

from actors.costs import load_profile
from experiments.cli import main
from protocols.index import Work


def test_padres_profile_charges_more_for_bigger_tables():
    padres = load_profile("padres")
    small, large = Work(match_entries=100, match_predicates=300), Work(match_entries=10_000, match_predicates=30_000)
    assert padres.service_us("pub", large) > padres.service_us("pub", small) > padres.service_us("pub", Work())
    assert padres.service_us("pub", Work()) == 1500
    assert load_profile("zero").service_us("pub", large) == 0


def test_calibrate_writes_a_profile_the_runtime_accepts(tmp_path, capsys):
    out = tmp_path / "mine.yaml"
    assert main(["calibrate", "--out", str(out), "--sizes", "200,800"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    profile = load_profile(str(out))
    coefficients = profile.per["default"]
    assert profile.base["default"] > 0
    assert coefficients["match_predicates"] > 0 or coefficients["match_entries"] > 0
    assert yaml.safe_load(out.read_text())["fitted"]["sizes"] == [200, 800]


def test_calibrate_refuses_bad_sizes(capsys):
    assert main(["calibrate", "--sizes", "ten"]) == 2
    assert "expected comma-separated integers" in capsys.readouterr().err
