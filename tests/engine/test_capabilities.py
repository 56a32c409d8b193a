"""The remedy for HCCS loss follows what the server model's HCCL actually does."""

from __future__ import annotations

from engine.capabilities import (
    CAPABILITIES,
    ESCALATE,
    NO,
    REPLACE_WITH_SPARE,
    ROCE_FAILOVER,
    SOURCES,
    UNKNOWN,
    YES,
    automatic_remedies,
    capability,
    remedies_for,
)


def keys(remedies):
    return [r.key for r in remedies]


def test_an_800t_a2_never_fails_over_to_roce_and_goes_to_a_spare() -> None:
    remedies = remedies_for("atlas-800t-a2", spare_available=True, last_start_s=612.0)
    assert keys(remedies) == [REPLACE_WITH_SPARE, ROCE_FAILOVER, ESCALATE]
    roce = remedies[1]
    assert roce.can_work == NO
    assert "200T A2 Box16" in roce.why and "isDiffDeviceModule" in roce.why
    assert set(roce.sources) == {"hccl-env-doc", "hccl-channel", "hccl-communicator"}
    assert remedies[0].can_work == YES and remedies[0].expected_downtime_s == 612.0
    assert keys(automatic_remedies(remedies)) == [REPLACE_WITH_SPARE, ESCALATE]


def test_without_a_spare_an_800i_a2_escalates() -> None:
    remedies = remedies_for("atlas-800i-a2", spare_available=False)
    assert keys(automatic_remedies(remedies)) == [ESCALATE]
    assert "No idle spare" in remedies[0].why


def test_a_box16_fails_over_to_roce_first_on_every_rank() -> None:
    remedies = remedies_for("atlas-200t-a2-box16", spare_available=True)
    assert keys(remedies) == [ROCE_FAILOVER, REPLACE_WITH_SPARE, ESCALATE]
    roce = remedies[0]
    assert roce.can_work == YES and roce.verifiable is True
    assert "every rank" in roce.why
    assert "vllm-ascend-mc2" in roce.sources
    assert keys(automatic_remedies(remedies)) == keys(remedies)


def test_a_box16_without_hccs_counters_says_the_switch_cannot_be_verified() -> None:
    roce = remedies_for(
        "atlas-200t-a2-box16", spare_available=True, hccs_counters_supported=False
    )[0]
    assert roce.can_work == YES and roce.verifiable is False
    assert "cannot verify" in roce.why


def test_an_unknown_model_runs_nothing_automatically_but_escalation() -> None:
    remedies = remedies_for(None, spare_available=True)
    assert {r.key: r.can_work for r in remedies} == {
        REPLACE_WITH_SPARE: UNKNOWN,
        ROCE_FAILOVER: UNKNOWN,
        ESCALATE: YES,
    }
    assert keys(automatic_remedies(remedies)) == [ESCALATE]
    assert capability("some-new-box").key == "unknown"


def test_a3_switch_only_affects_llm_datadist() -> None:
    roce = remedies_for("atlas-800t-a3", spare_available=False)[1]
    assert roce.key == ROCE_FAILOVER and roce.can_work == NO
    assert "LLM-DataDist" in roce.why


def test_every_entry_cites_known_sources() -> None:
    for cap in CAPABILITIES.values():
        assert "roce_switch" in cap.sources, cap.key
        for keys_ in cap.sources.values():
            assert all(k in SOURCES for k in keys_), cap.key
    d = remedies_for("atlas-800t-a2", spare_available=True)[1].to_dict()
    assert any("HCCL_INTRA_ROCE_ENABLE.md" in s for s in d["source_text"])


def test_next_remedy_moves_on_after_a_failed_or_unverifiable_one() -> None:
    from engine.capabilities import next_remedy

    box16 = remedies_for("atlas-200t-a2-box16", spare_available=True)
    assert next_remedy(box16).key == ROCE_FAILOVER
    assert next_remedy(box16, [ROCE_FAILOVER]).key == REPLACE_WITH_SPARE
    assert next_remedy(box16, [ROCE_FAILOVER, REPLACE_WITH_SPARE]).key == ESCALATE
    a2 = remedies_for("atlas-800t-a2", spare_available=False)
    assert next_remedy(a2).key == ESCALATE  # never the RoCE switch on an 800T A2


def test_the_statement_gives_each_remedy_its_downtime_and_source() -> None:
    from engine.capabilities import remedy_statement

    text = remedy_statement(
        "atlas-800t-a2",
        remedies_for("atlas-800t-a2", spare_available=True, last_start_s=612.4),
    )
    assert text.startswith("Server model: Atlas 800T A2.")
    assert (
        "1. replace_with_spare — can work here: yes; expected downtime ~612 s" in text
    )
    assert "2. roce_failover — can work here: no" in text
    assert "HCCL_INTRA_ROCE_ENABLE.md" in text and "channel.cc" in text
    assert "3. escalate — can work here: yes; no restart" in text
