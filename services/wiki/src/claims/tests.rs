use super::*;

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn sentences_of_many_shapes_give_their_claim() {
    let e = names(&["Portugal", "Acme Corp", "United States"]);
    let cases = [
        (
            "The population of Portugal is 10,467,366 (2024 est.).",
            "population",
            Some(10_467_366.0),
            20_240_000,
        ),
        ("Portugal's capital is Lisbon.", "capital", None, 0),
        (
            "Portugal has an area of 92,090 sq km.",
            "area",
            Some(92_090.0),
            0,
        ),
        (
            "In 2019, the GDP of Portugal was $239.5 billion.",
            "gdp",
            Some(239.5e9),
            20_190_000,
        ),
        (
            "Acme Corp has 1,200 employees.",
            "employees",
            Some(1200.0),
            0,
        ),
        (
            "Acme Corp was founded in 1999 by Jane Smith.",
            "founded",
            Some(1999.0),
            0,
        ),
        (
            "The total area of the United States is 9,833,517 square kilometres.",
            "area",
            Some(9_833_517.0),
            0,
        ),
        (
            "The United States had an estimated population of 331 million as of July 2021.",
            "population",
            Some(331e6),
            20_210_700,
        ),
    ];
    for (sentence, attribute, number, date) in cases {
        let claims = extract(sentence, 3, &e, None, 0);
        let claim = claims
            .iter()
            .find(|c| c.attribute == attribute)
            .unwrap_or_else(|| panic!("{sentence}: {claims:?}"));
        assert_eq!(claim.number, number, "{sentence}");
        assert_eq!(claim.date, date, "{sentence}");
        assert_eq!(claim.sentence, 3);
    }
    let capital = &extract("Portugal's capital is Lisbon.", 0, &e, None, 0)[0];
    assert_eq!(capital.value, "Lisbon");
}

#[test]
fn fact_lines_belong_to_the_subject_and_tables_to_their_rows() {
    let claims = extract(
        "Population: 10,467,366 (2024 est.)",
        0,
        &[],
        Some("Portugal"),
        0,
    );
    assert_eq!(claims[0].entity, "Portugal");
    assert_eq!(claims[0].attribute, "population");
    assert_eq!(claims[0].date, 20_240_000);
    let table = [
        "| Country | Population | Area (sq km) |",
        "|---|---|---|",
        "| Portugal | 10,467,366 | 92,090 |",
        "| Spain | 47.5 million | 505,370 |",
    ];
    let claims = from_table(&table, 10, 20_240_000, None, "");
    assert_eq!(claims.len(), 4);
    let spain = claims
        .iter()
        .find(|c| c.entity == "Spain" && c.attribute == "population")
        .unwrap();
    assert_eq!(spain.number, Some(47.5e6));
    let area = claims
        .iter()
        .find(|c| c.entity == "Portugal" && c.attribute == "area")
        .unwrap();
    assert_eq!(area.unit, "km²");
}

#[test]
fn a_documents_tables_are_about_its_subject_with_labels_and_periods_as_qualifiers() {
    // Two columns: fields of the subject.
    let fields = [
        "| Indicator | Value |",
        "|---|---|",
        "| Population | 10,194,277 |",
        "| Capital | Lisbon |",
    ];
    let claims = from_table(&fields, 3, 20_250_701, Some("Portugal"), "Portugal profile");
    assert_eq!(claims.len(), 2, "{claims:?}");
    assert!(
        claims
            .iter()
            .all(|c| c.entity == "Portugal" && c.qualifiers.is_empty())
    );
    assert_eq!(claims[1].attribute, "capital");
    assert_eq!(claims[1].value, "Lisbon");
    // Wider: the header names attributes, the row label qualifies, the period comes from the
    // header or the document's title.
    let kpis = [
        "| Channel | Spend (Q1 2026) | ROAS |",
        "|---|---|---|",
        "| Meta | $86,000 | 2.4 |",
        "| Conv. rate | 3% | 1.1 |",
    ];
    let claims = from_table(&kpis, 3, 20_260_406, Some("Acme"), "Acme report");
    let meta = claims
        .iter()
        .find(|c| c.attribute == "spend" && c.qualifiers.contains(&"meta".to_owned()))
        .unwrap();
    assert_eq!(meta.number, Some(86_000.0));
    assert_eq!(meta.qualifiers, ["meta", "q1 2026"]);
    assert!(
        claims
            .iter()
            .any(|c| c.qualifiers.contains(&"conv. rate".to_owned())),
        "{claims:?}"
    );
    let html = [
        "| Channel | Spend | ROAS |",
        "|---|---|---|",
        "| Meta | $86,000 | 2.4 |",
    ];
    let claims = from_table(
        &html,
        3,
        20_260_406,
        Some("Acme"),
        "Acme: Q2 2026 performance report",
    );
    assert!(
        claims.iter().all(|c| c.qualifiers == ["meta", "q2 2026"]),
        "{claims:?}"
    );
}

#[test]
fn periods_are_quarters_halves_fiscal_years_and_months_with_a_year() {
    assert_eq!(
        periods("Spend (Q1 2026) vs H2 2025, FY2024 and March 2026"),
        ["fy2024", "h2 2025", "march 2026", "q1 2026"]
    );
    assert!(periods("founded in 1999, 300 staff").is_empty());
}

#[test]
fn numbers_and_units_normalise() {
    for (text, value, unit) in [
        ("10,467,366 people", 10_467_366.0, ""),
        ("4.2M", 4.2e6, ""),
        ("1,200m", 1200.0, "m"),
        ("$4.2M in revenue", 4.2e6, "USD"),
        ("€3bn", 3e9, "EUR"),
        ("12.5%", 12.5, "%"),
        ("8.2e-05 g/cm3", 8.2e-5, ""),
        ("6.02E23 atoms", 6.02e23, ""),
        ("92,090 sq km", 92_090.0, "km²"),
        ("1.5 million", 1.5e6, ""),
        ("-0.3 percent", -0.3, "%"),
    ] {
        let (_, n, u, _) = number(text).unwrap_or_else(|| panic!("{text}"));
        assert!(
            (n - value).abs() < 1e-6 * value.abs().max(1.0),
            "{text}: {n}"
        );
        assert_eq!(u, unit, "{text}");
    }
    assert!(number("hello").is_none());
    assert_eq!(number("1,2,3").unwrap().1, 1.0);
}

#[test]
fn keys_merge_spellings() {
    assert_eq!(key("The United States"), "united states");
    assert_eq!(key("U.S."), "us");
    assert_eq!(key("Acme's"), "acme");
    assert_eq!(attribute("total area").as_deref(), Some("area"));
    assert_eq!(attribute("inhabitants").as_deref(), Some("population"));
    assert_eq!(attribute("it"), None);
}

#[test]
fn disagreement_has_a_tolerance() {
    let claim = |n: f64| Claim {
        entity: "X".into(),
        key: "x".into(),
        attribute: "population".into(),
        value: n.to_string(),
        number: Some(n),
        unit: String::new(),
        date: 0,
        sentence: 0,
        ..Claim::default()
    };
    assert!(!disagree(&claim(10_000_000.0), &claim(10_010_000.0)));
    assert!(disagree(&claim(10_000_000.0), &claim(11_000_000.0)));
    let founded = |year: f64| Claim {
        attribute: "founded".into(),
        ..claim(year)
    };
    assert!(
        disagree(&founded(1999.0), &founded(2001.0)),
        "years are exact"
    );
    assert!(!disagree(&founded(1999.0), &founded(1999.0)));
}

/// "X was released on July 7, 2023": the participle is the attribute, the day its value, and
/// the claim speaks as of its document (not as of the day it names); a year alone, a verb
/// that is not a participle, or no date give nothing.
#[test]
fn a_day_an_entity_was_acted_on_is_a_claim_as_of_the_document() {
    let e = names(&["Django 4.2.3", "Acme Corp"]);
    let claims = extract_with(
        "Django 4.2.3 was released on July 7, 2023, and the tarball was signed the same day.",
        2,
        &e,
        None,
        false,
        false,
        20_230_703,
    );
    let released: Vec<&Claim> = claims
        .iter()
        .filter(|c| c.attribute == "released")
        .collect();
    assert_eq!(released.len(), 1, "{claims:?}");
    assert_eq!(released[0].value, "2023-07-07");
    assert_eq!(released[0].number, None);
    assert_eq!(released[0].date, 20_230_703);
    assert_eq!(released[0].sentence, 2);
    for nothing in [
        "Acme Corp was founded in 1999.",
        "Acme Corp was acquired by a rival on Monday.",
        "Acme Corp was big on 3 March 2024.",
    ] {
        let claims = extract_with(nothing, 0, &e, None, false, false, 0);
        assert!(
            claims
                .iter()
                .all(|c| !c.value.starts_with("20") || c.attribute == "founded"),
            "{nothing}: {claims:?}"
        );
    }
}

/// An identifier with a year or a serial number in it labels a heading, not a field.
#[test]
fn identifiers_are_not_attributes() {
    assert_eq!(attribute("CVE-2023-36053"), None);
    assert_eq!(attribute("ISO-8601"), None);
    assert_eq!(
        attribute("COVID-19 cases").as_deref(),
        Some("covid-19 cases")
    );
    assert_eq!(attribute("Q1 revenue").as_deref(), Some("q1 revenue"));
}
