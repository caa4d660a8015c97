//! Just enough of the shell to read README.md's example lines as a person's shell would: words
//! in single or double quotes, a backslash that escapes, a comment, and the operators `|`, `;`,
//! `&&` and `>` between commands.

/// A piece of an example line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Word(String),
    /// `|`, `;`, `&&` or `>`.
    Operator(&'static str),
}

/// One command of a pipeline: its words, and the file its output goes to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stage {
    pub words: Vec<String>,
    pub output_file: Option<String>,
}

/// An example line's words and operators, and its comment (without the `#`).
pub fn tokens(line: &str) -> Result<(Vec<Token>, Option<String>), String> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    let mut word: Option<String> = None;
    while let Some(c) = chars.next() {
        match c {
            '#' if word.is_none() => {
                return Ok((tokens, Some(chars.collect::<String>().trim().to_string())));
            }
            ' ' | '\t' => finish(&mut word, &mut tokens),
            '|' | ';' | '>' => {
                finish(&mut word, &mut tokens);
                tokens.push(Token::Operator(match c {
                    '|' => "|",
                    ';' => ";",
                    _ => ">",
                }));
            }
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                finish(&mut word, &mut tokens);
                tokens.push(Token::Operator("&&"));
            }
            '\'' => {
                let quoted: String = chars.by_ref().take_while(|c| *c != '\'').collect();
                word.get_or_insert_with(String::new).push_str(&quoted);
            }
            '"' => double_quoted(&mut chars, word.get_or_insert_with(String::new))?,
            '\\' => {
                let escaped = chars.next().ok_or("a line ends in a backslash")?;
                word.get_or_insert_with(String::new).push(escaped);
            }
            '$' | '`' | '(' | ')' => return Err(format!("{c} is more shell than this reads")),
            other => word.get_or_insert_with(String::new).push(other),
        }
    }
    finish(&mut word, &mut tokens);
    Ok((tokens, None))
}

fn finish(word: &mut Option<String>, tokens: &mut Vec<Token>) {
    if let Some(word) = word.take() {
        tokens.push(Token::Word(word));
    }
}

fn double_quoted(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    word: &mut String,
) -> Result<(), String> {
    loop {
        match chars.next().ok_or("a double quote is not closed")? {
            '"' => return Ok(()),
            '\\' if matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) => {
                word.extend(chars.next());
            }
            '$' | '`' => return Err("a substitution in double quotes".into()),
            other => word.push(other),
        }
    }
}

/// The commands of a line, in order, each a pipeline of stages (`;` and `&&` both run the next
/// when the one before succeeded, which is all an example needs).
pub fn pipelines(tokens: &[Token]) -> Result<Vec<Vec<Stage>>, String> {
    let mut pipelines = vec![vec![Stage::default()]];
    let mut redirect = false;
    for token in tokens {
        let pipeline = pipelines.last_mut().ok_or("no pipeline")?;
        let stage = pipeline.last_mut().ok_or("no stage")?;
        match token {
            Token::Word(word) if redirect => {
                stage.output_file = Some(word.clone());
                redirect = false;
            }
            Token::Word(word) => stage.words.push(word.clone()),
            Token::Operator(">") => redirect = true,
            Token::Operator("|") => pipeline.push(Stage::default()),
            Token::Operator(_) => pipelines.push(vec![Stage::default()]),
        }
    }
    if redirect {
        return Err("`>` names no file".into());
    }
    Ok(pipelines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<Vec<String>>> {
        let (tokens, _) = tokens(line).unwrap();
        pipelines(&tokens)
            .unwrap()
            .into_iter()
            .map(|p| p.into_iter().map(|s| s.words).collect())
            .collect()
    }

    #[test]
    fn quotes_comments_and_operators_read_as_a_shell_reads_them() {
        assert_eq!(
            words(r#"svc search '"dublin core" metadata' --kind "a \"b\"" # a comment"#),
            [[[
                "svc",
                "search",
                "\"dublin core\" metadata",
                "--kind",
                "a \"b\""
            ]]]
        );
        assert_eq!(
            words("curl -s a; curl -s b | jq x"),
            vec![
                vec![vec!["curl", "-s", "a"]],
                vec![vec!["curl", "-s", "b"], vec!["jq", "x"]]
            ]
        );
        let (tokens, comment) = tokens("svc x > out.json  # note (network)").unwrap();
        assert_eq!(comment.as_deref(), Some("note (network)"));
        let stages = &pipelines(&tokens).unwrap()[0];
        assert_eq!(stages[0].output_file.as_deref(), Some("out.json"));
        assert!(super::tokens("echo $(date)").is_err());
    }
}
