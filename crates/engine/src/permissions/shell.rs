//! A small lexer for the part of bash the `auto` evaluator reasons about. It never runs
//! or expands anything: it records what the shell would do (expansions, globs, nested
//! commands) and gives up — marking the script opaque — on anything it does not model.

/// One word of a command after quote removal, with what the shell would still do to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Word {
    /// The text after quote removal; expansions are kept as written.
    pub text: String,
    /// Its final text cannot be known from the source: it has a parameter, command,
    /// arithmetic, process, brace or `$'…'` expansion.
    pub dynamic: bool,
    /// It has an unquoted glob pattern (`*`, `?`, `[…]`).
    pub glob: bool,
    /// It starts with a glob pattern, so it may expand to a word that starts with `-`.
    pub leading_glob: bool,
    /// It starts with an unquoted `~`.
    pub tilde: bool,
    /// Some of it was quoted or escaped.
    pub quoted: bool,
}

/// What a redirection does with its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RedirectKind {
    /// `<`: reads a file.
    Input,
    /// `>`, `>>`, `>|`, `&>`, `&>>`, `>&file`, `<>`: opens a file for writing.
    Output,
    /// `>&2`, `<&0`, `2>&-`: copies or closes a descriptor.
    Duplicate,
    /// `<<`, `<<-`: the target is the delimiter.
    HereDoc,
    /// `<<<`: the target is the text.
    HereString,
}

/// One redirection of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Redirect {
    pub kind: RedirectKind,
    pub target: Word,
}

/// A simple command: its words and redirections.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Command {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
}

/// A command line split into simple commands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Script {
    /// In order, whatever separates them (`;`, `&&`, `||`, `|`, `|&`, `&`, newlines).
    pub commands: Vec<Command>,
    /// The source of command, process and parameter substitutions, which run too.
    pub nested: Vec<String>,
    /// Why the lexer could not follow all of it, if it could not.
    pub opaque: Option<&'static str>,
}

/// Splits a command line; never fails, but marks what it does not understand.
pub(super) fn parse(src: &str) -> Script {
    let mut script = Lexer {
        chars: src.chars().collect(),
        pos: 0,
        script: Script::default(),
        current: Command::default(),
        here_docs: Vec::new(),
    }
    .run();
    // The command reaches bash through the environment, where a NUL ends it early.
    if src.contains('\0') {
        script.opaque.get_or_insert("a NUL character");
    }
    script
}

/// A here-document whose body starts after the next newline.
struct HereDoc {
    delimiter: String,
    strip_tabs: bool,
    /// A quoted delimiter keeps the body from being expanded.
    literal: bool,
    command: usize,
    redirect: usize,
}

/// A redirection operator, before its target is known.
enum Operator {
    Plain(RedirectKind),
    /// `>&` or `<&`: a descriptor copy, or a file when the target is not a number.
    Duplicate {
        input: bool,
    },
    HereDoc {
        strip_tabs: bool,
    },
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    script: Script,
    current: Command,
    here_docs: Vec<HereDoc>,
}

impl Lexer {
    fn run(mut self) -> Script {
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' => self.pos += 1,
                '\\' if self.peek(1) == Some('\n') => self.pos += 2,
                '#' => self.skip_comment(),
                '\n' => {
                    self.pos += 1;
                    self.end_command();
                    self.read_here_docs();
                }
                '&' if self.peek(1) == Some('>') => self.redirect(),
                ';' | '&' | '|' => self.separator(c),
                '(' | ')' => {
                    self.pos += 1;
                    self.end_command();
                    self.opaque("a subshell, group or function definition");
                }
                '<' | '>' if self.peek(1) == Some('(') => self.process_substitution(),
                '<' | '>' => self.redirect(),
                _ => self.word_or_redirect(),
            }
        }
        self.end_command();
        if !self.here_docs.is_empty() {
            self.opaque("an unterminated here-document");
        }
        self.script
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    /// Consumes and returns the next character.
    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.pos += 1;
        Some(c)
    }

    fn opaque(&mut self, why: &'static str) {
        self.script.opaque.get_or_insert(why);
    }

    fn end_command(&mut self) {
        if !self.current.words.is_empty() || !self.current.redirects.is_empty() {
            self.script.commands.push(std::mem::take(&mut self.current));
        }
    }

    fn skip_comment(&mut self) {
        while self.peek(0).is_some_and(|c| c != '\n') {
            self.pos += 1;
        }
    }

    fn separator(&mut self, c: char) {
        let next = self.peek(1);
        if c == ';' && matches!(next, Some(';' | '&')) {
            self.opaque("a case statement");
        }
        self.pos += 1;
        if (c == '&' && next == Some('&')) || (c == '|' && matches!(next, Some('|' | '&'))) {
            self.pos += 1;
        }
        self.end_command();
    }

    /// `<(…)` or `>(…)`: a command whose output or input becomes a file name.
    fn process_substitution(&mut self) {
        let start = self.pos;
        self.pos += 2;
        self.substitution('(', ')');
        let word = Word {
            text: self.chars[start..self.pos].iter().collect(),
            dynamic: true,
            ..Word::default()
        };
        self.current.words.push(word);
    }

    fn word_or_redirect(&mut self) {
        let word = self.word();
        let names_descriptor = !word.quoted
            && !word.dynamic
            && !word.text.is_empty()
            && word.text.chars().all(|c| c.is_ascii_digit());
        if names_descriptor && matches!(self.peek(0), Some('<' | '>')) {
            // `2>x`, `1>>x`: the number only picks the descriptor.
            self.redirect();
        } else {
            self.current.words.push(word);
        }
    }

    fn redirect(&mut self) {
        let (operator, len) = self.operator();
        self.pos += len;
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.pos += 1;
        }
        if self.peek(0).is_none_or(|c| "\n;&|()<>".contains(c)) {
            self.opaque("a redirection without a target");
            return;
        }
        let target = self.word();
        let kind = match operator {
            Operator::Plain(kind) => kind,
            Operator::Duplicate { .. } if names_descriptor_copy(&target) => RedirectKind::Duplicate,
            Operator::Duplicate { input: true } => RedirectKind::Input,
            Operator::Duplicate { input: false } => RedirectKind::Output,
            Operator::HereDoc { strip_tabs } => {
                self.here_docs.push(HereDoc {
                    delimiter: target.text.clone(),
                    strip_tabs,
                    literal: target.quoted,
                    command: self.script.commands.len(),
                    redirect: self.current.redirects.len(),
                });
                RedirectKind::HereDoc
            }
        };
        self.current.redirects.push(Redirect { kind, target });
    }

    /// The redirection operator at the cursor and its length.
    fn operator(&self) -> (Operator, usize) {
        let ahead: String = self.chars[self.pos..].iter().take(3).collect();
        let table: [(&str, Operator); 12] = [
            ("&>>", Operator::Plain(RedirectKind::Output)),
            ("&>", Operator::Plain(RedirectKind::Output)),
            ("<<<", Operator::Plain(RedirectKind::HereString)),
            ("<<-", Operator::HereDoc { strip_tabs: true }),
            ("<<", Operator::HereDoc { strip_tabs: false }),
            ("<>", Operator::Plain(RedirectKind::Output)),
            ("<&", Operator::Duplicate { input: true }),
            ("<", Operator::Plain(RedirectKind::Input)),
            (">>", Operator::Plain(RedirectKind::Output)),
            (">|", Operator::Plain(RedirectKind::Output)),
            (">&", Operator::Duplicate { input: false }),
            (">", Operator::Plain(RedirectKind::Output)),
        ];
        table
            .into_iter()
            .find(|(op, _)| ahead.starts_with(op))
            .map(|(op, operator)| (operator, op.len()))
            .unwrap_or((Operator::Plain(RedirectKind::Output), 1))
    }

    /// Reads the bodies of the here-documents opened on the line just ended.
    fn read_here_docs(&mut self) {
        for doc in std::mem::take(&mut self.here_docs) {
            let Some(body) = self.here_doc_body(&doc) else {
                self.opaque("an unterminated here-document");
                return;
            };
            // An unquoted delimiter lets `$(…)` and backticks in the body run.
            if !doc.literal && body.contains(['$', '`']) {
                match self
                    .script
                    .commands
                    .get_mut(doc.command)
                    .and_then(|c| c.redirects.get_mut(doc.redirect))
                {
                    Some(redirect) => redirect.target.dynamic = true,
                    None => self.opaque("a here-document"),
                }
            }
        }
    }

    fn here_doc_body(&mut self, doc: &HereDoc) -> Option<String> {
        let mut body = String::new();
        while self.pos < self.chars.len() {
            let end = self.chars[self.pos..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(self.chars.len(), |i| self.pos + i);
            let line: String = self.chars[self.pos..end].iter().collect();
            self.pos = (end + 1).min(self.chars.len());
            let compared = if doc.strip_tabs {
                line.trim_start_matches('\t')
            } else {
                &line
            };
            if compared == doc.delimiter {
                return Some(body);
            }
            body.push_str(&line);
            body.push('\n');
        }
        None
    }

    /// One word, up to an unquoted blank or operator character.
    fn word(&mut self) -> Word {
        let mut w = Word::default();
        // An unquoted `[` so far without its `]`, and whether it began the word.
        let mut open_bracket: Option<bool> = None;
        while let Some(c) = self.peek(0) {
            match c {
                ' ' | '\t' | '\n' | ';' | '&' | '|' | '(' | ')' | '<' | '>' => break,
                '\\' => self.escaped(&mut w),
                '\'' => self.single_quoted(&mut w),
                '"' => self.double_quoted(&mut w),
                '$' => self.dollar(&mut w, false),
                '`' => self.backquoted(&mut w),
                _ => {
                    self.pos += 1;
                    unquoted(&mut w, c, &mut open_bracket);
                }
            }
        }
        w
    }

    fn escaped(&mut self, w: &mut Word) {
        self.pos += 1;
        match self.bump() {
            Some('\n') => {} // a line continuation
            Some(c) => {
                w.text.push(c);
                w.quoted = true;
            }
            None => w.text.push('\\'),
        }
    }

    fn single_quoted(&mut self, w: &mut Word) {
        self.pos += 1;
        w.quoted = true;
        match self.chars[self.pos..].iter().position(|&c| c == '\'') {
            Some(len) => {
                w.text.extend(&self.chars[self.pos..self.pos + len]);
                self.pos += len + 1;
            }
            None => {
                self.pos = self.chars.len();
                self.opaque("an unterminated quote");
            }
        }
    }

    fn double_quoted(&mut self, w: &mut Word) {
        self.pos += 1;
        w.quoted = true;
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.pos += 1;
                    return;
                }
                '\\' => {
                    self.pos += 1;
                    match self.peek(0) {
                        Some('\n') => self.pos += 1,
                        Some(e @ ('$' | '`' | '"' | '\\')) => {
                            self.pos += 1;
                            w.text.push(e);
                        }
                        _ => w.text.push('\\'),
                    }
                }
                '$' => self.dollar(w, true),
                '`' => self.backquoted(w),
                _ => {
                    self.pos += 1;
                    w.text.push(c);
                }
            }
        }
        self.opaque("an unterminated quote");
    }

    /// `$` and what follows: an expansion (kept as written, marking the word dynamic) or a
    /// literal dollar sign.
    fn dollar(&mut self, w: &mut Word, in_double_quotes: bool) {
        let start = self.pos;
        self.pos += 1;
        match self.peek(0) {
            Some('(') => {
                self.pos += 1;
                self.substitution('(', ')');
            }
            Some('{') => {
                self.pos += 1;
                self.substitution('{', '}');
            }
            Some('[') => {
                // `$[…]`: the old spelling of arithmetic expansion.
                self.pos += 1;
                self.substitution('[', ']');
            }
            Some('\'') if !in_double_quotes => self.ansi_c_quoted(),
            Some('"') if !in_double_quotes => {
                // `$"…"` is translated text: as unknown as any expansion.
                self.double_quoted(w);
                w.dynamic = true;
                return;
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => self.pos += 1,
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                while self
                    .peek(0)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
            }
            _ => {
                w.text.push('$');
                return;
            }
        }
        w.dynamic = true;
        w.text.extend(&self.chars[start..self.pos]);
    }

    fn ansi_c_quoted(&mut self) {
        self.pos += 1;
        loop {
            match self.bump() {
                None => return self.opaque("an unterminated quote"),
                Some('\\') => {
                    self.bump();
                }
                Some('\'') => return,
                Some(_) => {}
            }
        }
    }

    /// The body of `$(…)`, `${…}` or `<(…)` up to the matching close, recorded as nested
    /// source; the cursor is just past the opening character.
    fn substitution(&mut self, open: char, close: char) {
        let start = self.pos;
        let mut depth = 1;
        while let Some(c) = self.bump() {
            match c {
                '\\' => {
                    self.bump();
                }
                '\'' | '"' | '`' => self.skip_quoted(c),
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        let inner = self.chars[start..self.pos - 1].iter().collect();
                        self.script.nested.push(inner);
                        return;
                    }
                }
                _ => {}
            }
        }
        self.opaque("an unterminated substitution");
    }

    /// Skips to the end of a quoted stretch inside a substitution.
    fn skip_quoted(&mut self, quote: char) {
        while let Some(c) = self.bump() {
            match c {
                '\\' if quote != '\'' => {
                    self.bump();
                }
                c if c == quote => return,
                _ => {}
            }
        }
    }

    /// `` `…` ``: an old-style command substitution.
    fn backquoted(&mut self, w: &mut Word) {
        let start = self.pos;
        self.pos += 1;
        let mut inner = String::new();
        loop {
            match self.bump() {
                None => {
                    self.opaque("an unterminated substitution");
                    break;
                }
                Some('`') => {
                    self.script.nested.push(inner);
                    break;
                }
                Some('\\') => {
                    if let Some(c) = self.bump() {
                        if !matches!(c, '`' | '\\' | '$') {
                            inner.push('\\');
                        }
                        inner.push(c);
                    }
                }
                Some(c) => inner.push(c),
            }
        }
        w.dynamic = true;
        w.text.extend(&self.chars[start..self.pos]);
    }
}

/// Adds an unquoted character to a word, noting globs, tildes and braces.
fn unquoted(w: &mut Word, c: char, open_bracket: &mut Option<bool>) {
    match c {
        '*' | '?' => {
            w.glob = true;
            w.leading_glob |= w.text.is_empty();
        }
        '[' => {
            open_bracket.get_or_insert(w.text.is_empty());
        }
        ']' => {
            if let Some(at_start) = open_bracket.take() {
                w.glob = true;
                w.leading_glob |= at_start;
            }
        }
        '~' if w.text.is_empty() && !w.quoted => w.tilde = true,
        // Brace expansion can turn one word into several.
        '{' | '}' => w.dynamic = true,
        _ => {}
    }
    w.text.push(c);
}

/// `>&2`, `<&0`, `>&-`, `2>&1-`: a descriptor, not a file.
fn names_descriptor_copy(target: &Word) -> bool {
    let digits = target.text.strip_suffix('-').unwrap_or(&target.text);
    !target.dynamic && (digits.is_empty() || digits.chars().all(|c| c.is_ascii_digit()))
}
