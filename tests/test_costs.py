"""The cost model and `pubsub-emu calibrate`."""
import pytest
import yaml

from actors.costs import load_profile
from experiments.cli import main
from protocols.index import Work


def test_padres_profile_charges_more_for_bigger_tables():
    padres = load_profile("padres")
    small, large = Work(match_entries=100, match_predicates=300), Work(match_entries=10_000, match_predicates=30_000)
    assert padres.service_us("pub", large) > padres.service_us("pub", small) > padres.service_us("pub", Work())
    # covering dominates subscription processing once tables are large, as PADRES measured
    assert padres.service_us("sub", Work(cover_predicates=30_000)) > 10 * padres.service_us("sub", Work())
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


def test_reference_fit_recovers_exact_targets():
    from actors.reference_fit import MODES, TARGETS_MS, fit, predicted_ms

    def work(pub_cells, cover_cells, joined_entries):
        counters = {"match_predicates": 6.0, "cover_predicates": cover_cells, "residual_checks": 0.0,
                    "insert_entries": joined_entries}
        return {"sub": counters, "pub": {"match_predicates": pub_cells, "residual_checks": 0.0},
                "unsub": {"cover_predicates": 0.0}}

    # publication and covering 3 us per cell, subscription matching 410 us + 0.1 us per entry
    # of the tables joined: every target is met exactly
    reference = {"active": work(1000, 4000, 4000), "lazy": work(1000 + 3200 / 3, 9000, 11_900),
                 "none": work(1000 + 4900 / 3, 0, 11_900)}
    profile = fit(reference)
    for mode in MODES:
        predicted = predicted_ms(profile, reference[mode])
        for row in ("pub", "sub covering", "sub matching"):
            assert predicted[row] == pytest.approx(TARGETS_MS[mode][row], rel=1e-6)
        assert predicted["unsub"] == pytest.approx(1.4)
    assert profile["per"]["sub"]["insert_entries"] == pytest.approx(0.1)
    assert profile["base"]["sub"] == pytest.approx(410, abs=0.1)


def test_the_publiy_profile_is_its_derivation_from_the_soft_link_papers_measurements():
    """By hand: 14.0 ms over 9.60 hops of 1 ms leaves 4.4 ms for 10.6 services, 415.1 us each;
    a subscription joins the MST and the WST, two edits of 17 ms / 6,500 (5.23 us); a WOM
    update 0.8 ms. No cost follows the index's work."""
    import yaml

    from actors.costs import PROFILE_DIR
    from actors.publiy_fit import profile

    shipped = yaml.safe_load((PROFILE_DIR / "publiy.yaml").read_text())
    assert shipped == profile()
    publiy = load_profile("publiy")
    busy = Work(match_predicates=10_000, cover_predicates=10_000, insert_entries=10_000)
    assert publiy.service_us("pub", busy) == publiy.service_us("pub", Work()) == 415
    assert publiy.service_us("sub", busy) == 5 and publiy.service_us("soft_open", Work()) == 800
