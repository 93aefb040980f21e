//! Deterministic text for the benchmark: short single-sentence chunks for ingestion and the
//! retrieval corpus, short keyword queries, and a long markdown document for the chunker.

use super::fake::splitmix;

/// Common English words: each is one cl100k token with its leading space, so a sentence of
/// `n` words and a number is about `n + 3` tokens.
const WORDS: &[&str] = &[
    "river",
    "stone",
    "harbor",
    "lantern",
    "winter",
    "market",
    "garden",
    "tower",
    "bridge",
    "forest",
    "island",
    "valley",
    "mountain",
    "village",
    "castle",
    "temple",
    "library",
    "road",
    "field",
    "ship",
    "storm",
    "queen",
    "king",
    "farmer",
    "soldier",
    "merchant",
    "teacher",
    "doctor",
    "child",
    "mother",
    "father",
    "friend",
    "stranger",
    "horse",
    "wolf",
    "bird",
    "fish",
    "tree",
    "flower",
    "fire",
    "water",
    "light",
    "shadow",
    "night",
    "morning",
    "evening",
    "summer",
    "spring",
    "autumn",
    "rain",
    "snow",
    "wind",
    "cloud",
    "sun",
    "moon",
    "star",
    "sea",
    "lake",
    "hill",
    "wall",
    "door",
    "window",
    "house",
    "room",
    "table",
    "chair",
    "book",
    "letter",
    "map",
    "key",
    "coin",
    "sword",
    "shield",
    "crown",
    "ring",
    "bread",
    "wine",
    "salt",
    "iron",
    "gold",
    "silver",
    "glass",
    "paper",
    "cloth",
    "rope",
    "wheel",
    "boat",
    "cart",
    "bell",
    "clock",
    "song",
    "story",
    "voice",
    "name",
    "word",
    "law",
    "war",
    "peace",
    "trade",
    "plan",
    "secret",
    "promise",
    "journey",
    "battle",
    "council",
    "festival",
    "prison",
    "school",
    "church",
    "mill",
    "mine",
    "farm",
    "army",
    "guard",
    "captain",
    "priest",
    "judge",
    "thief",
    "hunter",
    "sailor",
    "miller",
    "baker",
    "smith",
    "singer",
    "painter",
    "writer",
    "builder",
    "northern",
    "southern",
    "eastern",
    "western",
    "old",
    "new",
    "young",
    "ancient",
    "quiet",
    "loud",
    "bright",
    "dark",
    "cold",
    "warm",
    "small",
    "large",
    "long",
    "short",
    "high",
    "low",
    "green",
    "red",
    "blue",
    "white",
    "black",
    "golden",
    "hidden",
    "broken",
    "empty",
    "busy",
    "strong",
    "weak",
    "rich",
    "poor",
    "brave",
    "careful",
    "proud",
    "gentle",
    "wild",
    "simple",
    "strange",
    "famous",
    "sudden",
    "slow",
    "fast",
    "builds",
    "carries",
    "finds",
    "keeps",
    "loses",
    "opens",
    "closes",
    "guards",
    "watches",
    "follows",
    "crosses",
    "leaves",
    "reaches",
    "sells",
    "buys",
    "writes",
    "reads",
    "paints",
    "sings",
    "hears",
    "sees",
    "holds",
    "breaks",
    "mends",
    "fills",
    "burns",
    "lights",
    "rules",
    "serves",
    "meets",
    "calls",
    "sends",
    "brings",
    "takes",
    "gives",
    "shows",
    "hides",
    "teaches",
    "learns",
    "remembers",
    "forgets",
    "wins",
    "fights",
    "rests",
    "waits",
    "walks",
    "rides",
    "sails",
    "climbs",
    "plants",
    "grows",
    "gathers",
    "counts",
    "measures",
    "studies",
    "visits",
    "across",
    "behind",
    "beyond",
    "near",
    "under",
    "over",
    "through",
    "along",
    "around",
    "between",
    "against",
    "toward",
    "without",
    "within",
    "after",
    "before",
    "during",
    "since",
    "until",
    "again",
    "often",
    "never",
    "always",
    "soon",
    "still",
    "even",
    "only",
    "also",
    "together",
    "alone",
    "early",
    "late",
    "every",
    "each",
    "other",
    "another",
    "first",
    "last",
    "second",
    "third",
    "whole",
    "half",
    "many",
    "few",
    "several",
    "some",
    "most",
    "more",
    "less",
];

const CONNECT: &[&str] = &["and", "but", "while", "because", "so", "when", "where", "then"];

/// A deterministic word stream.
pub struct Words {
    state: u64,
}

impl Words {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    fn next(&mut self, n: usize) -> usize {
        (splitmix(&mut self.state) % n as u64) as usize
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.next(WORDS.len())]
    }

    /// One sentence of 16..=20 words plus a number ("… in year 1234."): 18–26 tokens, so any
    /// two of them together exceed 32 tokens and a 32-token world puts each in its own chunk.
    pub fn sentence(&mut self) -> String {
        let n = 16 + self.next(5);
        let mut s = String::with_capacity(n * 8 + 16);
        for i in 0..n {
            let w = if i == n / 2 {
                CONNECT[self.next(CONNECT.len())]
            } else {
                self.word()
            };
            if i == 0 {
                let mut c = w.chars();
                if let Some(first) = c.next() {
                    s.extend(first.to_uppercase());
                    s.push_str(c.as_str());
                }
            } else {
                s.push(' ');
                s.push_str(w);
            }
        }
        s.push_str(&format!(" in year {}.", 100 + self.next(1900)));
        s
    }

    /// `n` sentences, one paragraph each: `n` chunks in a world of `max_tokens` 32.
    pub fn corpus(&mut self, n: usize) -> String {
        let mut text = String::with_capacity(n * 130);
        for _ in 0..n {
            text.push_str(&self.sentence());
            text.push_str("\n\n");
        }
        text
    }

    /// A keyword query of 3..=6 words.
    pub fn query(&mut self) -> String {
        let n = 3 + self.next(4);
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }

    /// About `bytes` of markdown: sections with headings, paragraphs of 2–8 sentences of
    /// varied length, bullet and numbered lists, quotes and the odd code fence.
    pub fn markdown(&mut self, bytes: usize) -> String {
        let mut text = String::with_capacity(bytes + 4096);
        let mut section = 0;
        while text.len() < bytes {
            section += 1;
            text.push_str(&format!("# Part {section}: the {} {}\n\n", self.word(), self.word()));
            for sub in 0..(2 + self.next(4)) {
                text.push_str(&format!(
                    "## {}.{} {} {}\n\n",
                    section,
                    sub + 1,
                    self.word(),
                    self.word()
                ));
                for _ in 0..(2 + self.next(7)) {
                    match self.next(10) {
                        0 | 1 => {
                            for i in 0..(3 + self.next(5)) {
                                let marker = if self.next(2) == 0 {
                                    "-".to_owned()
                                } else {
                                    format!("{}.", i + 1)
                                };
                                text.push_str(&format!("{marker} {}\n", self.prose_sentence()));
                            }
                            text.push('\n');
                        }
                        2 => {
                            text.push_str(&format!("> {}\n\n", self.prose_sentence()));
                        }
                        3 if self.next(3) == 0 => {
                            text.push_str("```\n");
                            for _ in 0..(2 + self.next(6)) {
                                text.push_str(&format!("let {} = {}({});\n", self.word(), self.word(), self.next(100)));
                            }
                            text.push_str("```\n\n");
                        }
                        _ => {
                            let n = 2 + self.next(7);
                            let paragraph: Vec<String> = (0..n).map(|_| self.prose_sentence()).collect();
                            // Hard-wrapped now and then, as hand-written markdown often is.
                            let mut para = paragraph.join(" ");
                            if self.next(3) == 0 {
                                para = wrap(&para, 78);
                            }
                            text.push_str(&para);
                            text.push_str("\n\n");
                        }
                    }
                }
            }
        }
        text
    }

    /// A sentence of 4..=40 words with the odd comma, emphasis or question.
    fn prose_sentence(&mut self) -> String {
        let n = 4 + self.next(37);
        let mut s = String::new();
        for i in 0..n {
            let mut w = self.word().to_owned();
            if i == 0 {
                w = w[..1].to_uppercase() + &w[1..];
            } else {
                s.push(' ');
            }
            match self.next(25) {
                0 => w = format!("*{w}*"),
                1 => w = format!("**{w}**"),
                2 if i + 1 < n => w.push(','),
                _ => {}
            }
            s.push_str(&w);
        }
        s.push(if self.next(8) == 0 { '?' } else { '.' });
        s
    }
}

fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / width);
    let mut line = 0;
    for word in text.split(' ') {
        if line > 0 && line + 1 + word.len() > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.len();
    }
    out
}
