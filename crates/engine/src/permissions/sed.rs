//! Which `sed` calls only print: GNU sed's `e`, `w`, `W`, `r`, `R` commands, the `e` and
//! `w` flags of `s` and `-i` run programs or touch files, so only a small grammar of
//! printing commands is accepted and everything else asks.

use super::Word;

/// Commands that only print, move through the input or stop.
const QUIET: &str = "pPdDnNgGhHxz=F";

/// Whether `sed` with these arguments only prints: no `-i`, no script file, and every
/// script within the accepted grammar.
pub(super) fn only_prints(args: &[Word]) -> bool {
    scripts(args).is_some_and(|(scripts, _)| {
        !scripts.is_empty() && scripts.iter().all(|s| script_only_prints(s))
    })
}

/// The positions of the arguments that hold scripts rather than input files (an `-e` word
/// with its script attached, the word after a bare `-e`, or the first operand); empty when
/// the options are not understood, so that every argument counts as a file.
pub(super) fn script_words(args: &[Word]) -> Vec<usize> {
    scripts(args).map(|(_, at)| at).unwrap_or_default()
}

/// The scripts and the positions of the words holding them, if every option is understood.
fn scripts(args: &[Word]) -> Option<(Vec<&str>, Vec<usize>)> {
    let mut scripts: Vec<&str> = Vec::new();
    let mut at: Vec<usize> = Vec::new();
    let mut first_operand = None;
    let mut options_done = false;
    let mut args = args.iter().enumerate();
    while let Some((i, arg)) = args.next() {
        if arg.glob {
            return None; // may expand to anything, options included
        }
        let text = arg.text.as_str();
        if options_done || text == "-" || !text.starts_with('-') {
            first_operand.get_or_insert((i, text));
        } else if first_operand.is_some() {
            // With POSIXLY_CORRECT set, options after an operand are operands too.
            return None;
        } else if text == "--" {
            options_done = true;
        } else if let Some(long) = text.strip_prefix("--") {
            let (option, value) = long
                .split_once('=')
                .map_or((long, None), |(o, v)| (o, Some(v)));
            match option {
                "quiet" | "silent" | "regexp-extended" | "separate" | "unbuffered"
                | "null-data" | "zero-terminated" | "posix" | "debug" | "sandbox"
                    if value.is_none() => {}
                "expression" => match value {
                    Some(script) => {
                        scripts.push(script);
                        at.push(i);
                    }
                    None => {
                        let (j, next) = args.next()?;
                        scripts.push(next.text.as_str());
                        at.push(j);
                    }
                },
                "line-length" => {
                    if value.is_none() {
                        args.next();
                    }
                }
                _ => return None, // --in-place, --file, abbreviations, …
            }
        } else {
            let flags = &text[1..];
            for (pos, flag) in flags.char_indices() {
                match flag {
                    'n' | 'r' | 'E' | 's' | 'u' | 'z' => {}
                    'e' | 'l' => {
                        let rest = &flags[pos + 1..];
                        let (j, value) = if rest.is_empty() {
                            match args.next() {
                                Some((j, a)) if !a.glob => (j, a.text.as_str()),
                                _ => return None,
                            }
                        } else {
                            (i, rest)
                        };
                        if flag == 'e' {
                            scripts.push(value);
                            at.push(j);
                        }
                        break;
                    }
                    _ => return None, // -i edits files, -f reads a script we cannot see
                }
            }
        }
    }
    // Without `-e` the first operand is the script.
    if scripts.is_empty()
        && let Some((i, text)) = first_operand
    {
        scripts.push(text);
        at.push(i);
    }
    Some((scripts, at))
}

/// Whether a script is made only of [address[,address]][!] followed by a printing command,
/// `q`/`Q`, braces, or `s` with the flags `g p i I m M` and a count.
pub(super) fn script_only_prints(script: &str) -> bool {
    Parser {
        s: script.chars().collect(),
        pos: 0,
    }
    .script()
}

struct Parser {
    s: Vec<char>,
    pos: usize,
}

impl Parser {
    fn script(&mut self) -> bool {
        loop {
            self.skip(|c| c.is_whitespace() || c == ';');
            if self.pos >= self.s.len() {
                return true;
            }
            if !self.addresses() {
                return false;
            }
            match self.command() {
                Some(true) if !self.end_of_command() => return false,
                Some(_) => {}
                None => return false,
            }
        }
    }

    fn peek(&self) -> Option<char> {
        self.s.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(c);
        if found {
            self.pos += 1;
        }
        found
    }

    fn skip(&mut self, keep_going: impl Fn(char) -> bool) {
        while self.peek().is_some_and(&keep_going) {
            self.pos += 1;
        }
    }

    fn skip_blanks(&mut self) {
        self.skip(|c| c == ' ' || c == '\t');
    }

    fn digits(&mut self) -> bool {
        let start = self.pos;
        self.skip(|c| c.is_ascii_digit());
        self.pos > start
    }

    /// One address, if there is one: `N`, `N~M`, `$` or `/regex/` with `I`/`M`.
    /// `None` when it is malformed.
    fn address(&mut self) -> Option<bool> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() => {
                self.digits();
                if self.eat('~') && !self.digits() {
                    return None;
                }
                Some(true)
            }
            Some('$') => {
                self.pos += 1;
                Some(true)
            }
            Some('/') => {
                self.pos += 1;
                self.regex('/')?;
                self.skip(|c| c == 'I' || c == 'M');
                Some(true)
            }
            _ => Some(false),
        }
    }

    fn addresses(&mut self) -> bool {
        match self.address() {
            None => false,
            Some(false) => true,
            Some(true) => {
                self.skip_blanks();
                if !self.eat(',') {
                    return true;
                }
                self.skip_blanks();
                if self.eat('+') || self.eat('~') {
                    self.digits()
                } else {
                    self.address() == Some(true)
                }
            }
        }
    }

    /// One accepted command; `Some(needs_end)` says whether a separator must follow.
    fn command(&mut self) -> Option<bool> {
        self.skip_blanks();
        if self.eat('!') {
            self.skip_blanks();
        }
        match self.next()? {
            c if QUIET.contains(c) => Some(true),
            '{' => Some(false),
            '}' => Some(true),
            'q' | 'Q' => {
                self.skip_blanks();
                self.digits();
                Some(true)
            }
            's' => self.substitution().then_some(true),
            _ => None, // e, w, W, r, R, a, i, c, y, b, t, :, #, …
        }
    }

    fn end_of_command(&mut self) -> bool {
        self.skip_blanks();
        matches!(self.peek(), None | Some(';' | '\n' | '}'))
    }

    /// `s/regex/replacement/flags` with only flags that print or match.
    fn substitution(&mut self) -> bool {
        let Some(delim) = self.next() else {
            return false;
        };
        // Brackets as delimiters would be read differently by sed's bracket handling.
        if !delim.is_ascii_punctuation() || matches!(delim, '\\' | '[' | ']') {
            return false;
        }
        if self.regex(delim).is_none() || !self.replacement(delim) {
            return false;
        }
        self.skip(|c| "gpiImM".contains(c) || c.is_ascii_digit());
        true
    }

    /// A regex up to the closing delimiter. GNU sed does not end a regex inside a bracket
    /// expression, so only brackets that every reading ends at the same `]` are accepted.
    fn regex(&mut self, delim: char) -> Option<()> {
        loop {
            match self.next()? {
                '\n' => return None,
                '\\' => {
                    self.next()?;
                }
                '[' => self.bracket(delim)?,
                c if c == delim => return Some(()),
                _ => {}
            }
        }
    }

    /// A bracket expression without the delimiter, nested brackets, backslashes or a
    /// leading `]` (which sed reads as a member rather than the end).
    fn bracket(&mut self, delim: char) -> Option<()> {
        self.eat('^');
        let mut empty = true;
        loop {
            match self.next()? {
                ']' if !empty => return Some(()),
                c if c == delim || matches!(c, '[' | ']' | '\\' | '\n') => return None,
                _ => empty = false,
            }
        }
    }

    fn replacement(&mut self, delim: char) -> bool {
        loop {
            match self.next() {
                None => return false,
                Some('\\') => {
                    if self.next().is_none() {
                        return false;
                    }
                }
                Some(c) if c == delim => return true,
                Some(_) => {}
            }
        }
    }
}
