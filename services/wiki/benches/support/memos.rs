//! The memos the wiki's scale benchmarks ingest: `ingest_scale` here, and `tp-bench`'s wiki
//! scenario (which includes this file by path). Memo `n` is about one company of 100 (hub
//! pages that grow), names two people and a city of 10, and states a figure, a change and a
//! plan.
#![allow(
    dead_code,
    reason = "each includer uses one kind of people and not every field"
)]

const FIRST: [&str; 16] = [
    "Ada", "Bruno", "Chen", "Dara", "Emil", "Farah", "Goran", "Hana", "Ivo", "Jana", "Kofi",
    "Lena", "Milan", "Nadia", "Oskar", "Petra",
];
const LAST: [&str; 12] = [
    "Adler",
    "Brandt",
    "Costa",
    "Duarte",
    "Eklund",
    "Fischer",
    "Garcia",
    "Horvat",
    "Ito",
    "Jensen",
    "Kowalski",
    "Lindqvist",
];
const SYLLABLES: [&str; 20] = [
    "bra", "vel", "tor", "quin", "mar", "zen", "lo", "dri", "fen", "cas", "pel", "rho", "sta",
    "nov", "gal", "wyn", "tek", "ora", "lum", "vex",
];
const CITIES: [&str; 10] = [
    "Lisbon", "Porto", "Krakow", "Gdansk", "Lyon", "Nantes", "Utrecht", "Ghent", "Tartu", "Riga",
];
const PREFIX: [&str; 10] = [
    "Nova", "Blue", "Iron", "Silver", "North", "Delta", "Prime", "Urban", "Cedar", "Harbor",
];
const SUFFIX: [&str; 10] = [
    "Labs",
    "Systems",
    "Works",
    "Foods",
    "Energy",
    "Logistics",
    "Health",
    "Media",
    "Capital",
    "Robotics",
];

/// Who a memo names.
#[derive(Debug, Clone, Copy)]
pub(crate) enum People {
    /// 192 people who recur across the memos.
    Recurring,
    /// Two people of its own per memo (new entity pages each time), below memo 4,000.
    Unique,
}

/// A memo: its label, its text, the first person it names and its company.
#[derive(Debug)]
pub(crate) struct Memo {
    pub(crate) label: String,
    pub(crate) text: String,
    pub(crate) person: String,
    pub(crate) company: String,
}

/// A surname of its own for each `i` below 8,000.
fn surname(i: usize) -> String {
    let word: String = [i % 20, (i / 20) % 20, (i / 400) % 20]
        .iter()
        .map(|&k| SYLLABLES[k])
        .collect();
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// Memo `n`.
pub(crate) fn memo(n: usize, people: People) -> Memo {
    let company = format!("{} {}", PREFIX[n % 10], SUFFIX[(n / 10) % 10]);
    let person = |k: usize| match people {
        People::Recurring => format!(
            "{} {}",
            FIRST[(n * 7 + k) % FIRST.len()],
            LAST[(n * 5 + k * 3) % LAST.len()]
        ),
        People::Unique => format!("{} {}", FIRST[(n + 7 * k) % 16], surname(2 * n + k)),
    };
    let (a, b) = (person(0), person(1));
    let city = CITIES[(n / 3) % CITIES.len()];
    let text = format!(
        "---\ndate: 2025-{:02}-{:02}\nsubject: {company}\n---\n\
         # {company} memo {n}\n\n\
         {a} met {b} of {company} in {city} to review the quarter.\n\
         {company} reported revenue of {} million euros for the quarter.\n\
         The headcount of {company} moved from {} to {} people.\n\
         {b} said the {city} office would open a second floor in the spring.\n\
         {a} will send the renewal terms to {company} before the end of the month.\n",
        n % 12 + 1,
        n % 27 + 1,
        10 + n % 90,
        40 + n % 60,
        45 + n % 70,
    );
    Memo {
        label: format!("{company} memo {n}"),
        text,
        person: a,
        company,
    }
}
