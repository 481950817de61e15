"""Search terms: normalisation, identifier splitting, CJK bigrams, stemming and stop words."""

from __future__ import annotations

from gateway.skills.tokens import terms


def test_identifiers_split_at_underscores_hyphens_camel_case_and_digits() -> None:
    assert terms("files__read_file") == ["file", "read", "file"]
    assert terms("getHTTPResponse-code") == ["http", "respons", "code"]
    assert terms("base64Encode") == ["base", "64", "encod"]
    assert terms("mcp_howtocook_getRecipesByCategory") == ["mcp", "howtocook", "recip", "categori"]


def test_normalisation_folds_width_case_and_ligatures() -> None:
    assert terms("\uff30\uff24\uff26 Report") == ["pdf", "report"]
    assert terms("ﬁle") == terms("FILE") == ["file"]
    assert terms("Straße") == terms("STRASSE")


def test_english_words_are_stemmed_and_stop_words_dropped() -> None:
    assert terms("What is the SQL, please?") == ["sql"]
    assert terms("list tables; process glass") == ["list", "tabl", "process", "glass"]
    assert terms("running") == terms("runs") == ["run"]
    assert terms("calculation") == terms("calculate")


def test_cjk_text_becomes_characters_and_their_bigrams() -> None:
    assert terms("搜索网页") == ["搜", "索", "网", "页", "搜索", "索网", "网页"]
    # A particle stays inside bigrams (they match the text as written) but is no term on its own.
    assert "的" not in terms("网页的内容") and "页的" in terms("网页的内容")
    assert terms("火车票 train") == ["火", "车", "票", "火车", "车票", "train"]
    assert terms("ミュージック") == ["ミ", "ュ", "ー", "ジ", "ッ", "ク", "ミュ", "ュー", "ージ", "ジッ", "ック"]
    assert terms("한국어") == ["한", "국", "어", "한국", "국어"]


def test_a_chinese_query_shares_terms_with_a_chinese_description_without_spaces() -> None:
    description = set(terms("使用必应搜索指定的关键词\uff0c并返回搜索结果列表"))
    assert {"搜索", "关键", "键词"} <= description
    assert set(terms("用必应搜索关键词")) & description >= {"必应", "搜索", "关键"}


def test_empty_and_symbol_only_text_has_no_terms() -> None:
    assert terms("") == terms("  -_/ ") == terms("the of and") == []
