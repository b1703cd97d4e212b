"""CTC decoding: greedy, prefix beam search, lexicon, confidences, lengths masking."""
import itertools
import math
import random

import pytest
import torch
import torch.nn.functional as F

from crnn.charset import Charset
from crnn.decode import (Lexicon, WordList, beam_decode, decode, greedy_decode, prefix_beam_search,
                         sequence_log_likelihood, word_decode)
from crnn.metrics import edit_distance

AB = Charset("ab")  # classes: 0 blank, 1 a, 2 b


def path_logits(paths: list[list[int]], num_classes: int, top: float = 0.7) -> torch.Tensor:
    """Log-probs [B, T, C] where each step puts ``top`` on the path's id and spreads the rest."""
    rest = (1.0 - top) / (num_classes - 1)
    probs = torch.full((len(paths), len(paths[0]), num_classes), rest)
    probs.scatter_(2, torch.tensor(paths)[..., None], top)
    return probs.log()


def collapse(path) -> tuple[int, ...]:
    """Reference CTC collapse."""
    out = [c for i, c in enumerate(path) if c != 0 and (i == 0 or c != path[i - 1])]
    return tuple(out)


def brute_force_labellings(probs: torch.Tensor) -> dict[tuple[int, ...], float]:
    """P(labelling) for one sample [T, C] by enumerating every path (tiny T and C only)."""
    T, C = probs.shape
    totals: dict[tuple[int, ...], float] = {}
    for path in itertools.product(range(C), repeat=T):
        p = math.prod(float(probs[t, c]) for t, c in enumerate(path))
        totals[collapse(path)] = totals.get(collapse(path), 0.0) + p
    return totals


def true_log_prob(log_probs: torch.Tensor, text: str, charset: Charset) -> float:
    """Reference log P(text | x) for one sample [T, C] via ctc_loss in float64."""
    targets, lengths = charset.encode([text])
    lp = log_probs.double()[:, None, :]  # [T, 1, C]
    nll = F.ctc_loss(lp, targets, torch.tensor([lp.shape[0]]), lengths, reduction="none")
    return -float(nll[0])


# ------------------------------------------------------------------ greedy
def test_greedy_collapses_repeats_and_drops_blanks():
    logits = path_logits([[1, 1, 0, 1, 2, 2, 0], [1, 1, 1, 1, 1, 1, 1], [1, 0, 1, 0, 0, 2, 1]], 3)
    texts = [t for t, _ in greedy_decode(logits, AB)]
    assert texts == ["aab", "a", "aaba"]


def test_greedy_confidence_is_the_texts_probability_not_its_best_paths():
    log_probs = path_logits([[1, 0, 2, 2]], 3, top=0.7)
    (text, conf), = greedy_decode(log_probs, AB)
    assert text == "ab"
    assert conf == pytest.approx(math.exp(true_log_prob(log_probs[0], "ab", AB)), rel=1e-6)
    assert conf > 0.7 ** 4 * 2  # the best path is one of several alignments of "ab" (a-b-b, a-a-b, ab--, ...)


def test_greedy_confidence_of_a_character_placed_at_one_step_or_the_next():
    """A line the model reads right but whose one character it puts at step 2 or 3 with even odds: the best path
    holds half the probability, the text all of it (the Chinese model's sample line read at 0.52 that way)."""
    probs = torch.full((1, 4, 3), 1e-6)
    probs[0, 0, 1] = probs[0, 3, 2] = 1.0  # "a" at step 0, "b" at step 3
    probs[0, 1, 0] = 1.0  # a blank between them
    probs[0, 2, 0] = probs[0, 2, 2] = 0.5  # step 2: blank or "b" (b-b merges into one "b")
    (text, conf), = greedy_decode((probs / probs.sum(-1, keepdim=True)).log(), AB)
    assert text == "ab"
    assert conf == pytest.approx(1.0, abs=1e-4)


def test_greedy_confidence_with_a_large_alphabet_and_padding():
    """Thousands of classes (Chinese lines): the probability is computed on the columns the readings use; samples
    padded past their lengths read and score as the unpadded sample alone does."""
    torch.manual_seed(3)
    cs = Charset("".join(chr(0x4E00 + i) for i in range(5000)))
    logits = torch.randn(3, 20, cs.num_classes) * 6
    lengths = torch.tensor([20, 11, 0])
    out = greedy_decode(logits, cs, lengths)
    log_probs = logits.log_softmax(-1)
    for b, n in enumerate(lengths.tolist()):
        text, conf = out[b]
        if n == 0:
            assert (text, conf) == ("", 1.0)
            continue
        assert greedy_decode(logits[b:b + 1, :n], cs) == [(text, pytest.approx(conf, rel=1e-9))]
        assert conf == pytest.approx(math.exp(true_log_prob(log_probs[b, :n], text, cs)), rel=1e-6)
        best_path = float(log_probs[b, :n].max(-1).values.double().sum().exp())
        assert conf >= best_path * (1 - 1e-9)


def test_greedy_all_blank_gives_empty_text():
    (text, conf), = greedy_decode(path_logits([[0, 0, 0]], 3, top=0.9), AB)
    assert text == "" and conf == pytest.approx(0.9 ** 3, rel=1e-5)


def test_greedy_lengths_mask_padding():
    logits = path_logits([[1, 2, 2, 1], [2, 0, 1, 1]], 3, top=0.8)
    out = greedy_decode(logits, AB, lengths=torch.tensor([2, 4]))
    assert out[0][0] == "ab" and out[0][1] == pytest.approx(0.8 ** 2, rel=1e-5)
    assert out[1][0] == "ba"  # all of its alignments (b-a-, bb-a, ...), not only the best path b-aa
    assert out[1][1] == pytest.approx(math.exp(true_log_prob(logits[1], "ba", AB)), rel=1e-5)
    assert greedy_decode(logits[:1, :2], AB) == [out[0]]


def test_zero_length_sample_is_empty_with_confidence_one():
    logits = path_logits([[1, 2]], 3)
    for method in ("greedy", "beam"):
        (text, conf), = decode(logits, AB, method, lengths=torch.tensor([0]))
        assert (text, conf) == ("", pytest.approx(1.0)), method


def test_greedy_accepts_other_float_dtypes():
    torch.manual_seed(0)
    logits = torch.randn(4, 9, 3) * 4
    ref = [t for t, _ in greedy_decode(logits, AB)]
    assert [t for t, _ in greedy_decode(logits.double(), AB)] == ref
    assert [t for t, _ in greedy_decode(logits.to(torch.bfloat16).float(), AB)] == \
        [t for t, _ in greedy_decode(logits.to(torch.bfloat16), AB)]


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match=r"\[B, T, 3\]"):
        greedy_decode(torch.zeros(2, 5, 4), AB)
    with pytest.raises(ValueError, match="lengths"):
        greedy_decode(torch.zeros(2, 5, 3), AB, lengths=torch.tensor([5, 6]))
    with pytest.raises(ValueError, match="lengths"):
        beam_decode(torch.zeros(2, 5, 3), AB, lengths=torch.tensor([5]))


# ------------------------------------------------------------------ beam
def test_beam_beats_greedy_on_the_classic_example():
    # each step: blank 0.6, a 0.4. Best path "" (0.36) but P("a") = 0.16 + 0.24 + 0.24 = 0.64
    logits = torch.tensor([[[0.6, 0.4, 0.0], [0.6, 0.4, 0.0]]]).log()
    assert greedy_decode(logits, AB)[0] == ("", pytest.approx(0.36))
    assert beam_decode(logits, AB, beam_width=2)[0] == ("a", pytest.approx(0.64))


def test_beam_distinguishes_repeat_with_and_without_blank():
    logits = path_logits([[1, 1, 2], [1, 0, 1]], 3, top=0.9)
    assert [t for t, _ in beam_decode(logits, AB)] == ["ab", "aa"]


def test_beam_and_greedy_agree_on_peaked_posteriors():
    torch.manual_seed(1)
    cs = Charset.from_spec("alnum36")
    paths = torch.randint(0, cs.num_classes, (16, 20))
    logits = torch.randn(16, 20, cs.num_classes)
    logits.scatter_(2, paths[..., None], 15.0)
    lengths = torch.randint(0, 21, (16,))
    greedy = greedy_decode(logits, cs, lengths)
    beam = beam_decode(logits, cs, lengths, beam_width=5)
    assert [t for t, _ in beam] == [t for t, _ in greedy]
    for (_, cb), (_, cg) in zip(beam, greedy):
        assert cg == pytest.approx(cb, rel=1e-5)  # both: the probability of the same text over all its alignments


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("width", [1, 3])
def test_beam_labelling_never_less_probable_than_greedy(seed, width):
    # a plain prefix beam search loses to greedy on about 4% of these samples at width 3
    torch.manual_seed(seed)
    cs = Charset("abcd")
    logits = torch.randn(8, 12, cs.num_classes) * 1.5
    lengths = torch.tensor([12] * 6 + [7, 1])
    log_probs = logits.log_softmax(-1)
    greedy = greedy_decode(logits, cs, lengths)
    beam = beam_decode(logits, cs, lengths, beam_width=width)
    for b, n in enumerate(lengths.tolist()):
        lp_beam = true_log_prob(log_probs[b, :n], beam[b][0], cs)
        lp_greedy = true_log_prob(log_probs[b, :n], greedy[b][0], cs)
        assert lp_beam >= lp_greedy - 1e-6
        assert math.log(beam[b][1]) == pytest.approx(lp_beam, abs=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_prefix_beam_search_without_pruning_is_exact(seed):
    torch.manual_seed(200 + seed)
    probs = 0.15 + 0.55 * torch.randn(4, 3).mul(2).softmax(-1)  # every path within e^-10 of the best
    totals = brute_force_labellings(probs)
    nbest = prefix_beam_search(probs.log(), beam_width=1000, prune_threshold=0.0)
    assert {ids for ids, _ in nbest} == set(totals)
    for ids, score in nbest:
        assert math.exp(score) == pytest.approx(totals[ids], rel=1e-5), ids
    scores = [s for _, s in nbest]
    assert scores == sorted(scores, reverse=True)


def test_prefix_beam_search_width_and_threshold_limit_the_beam():
    torch.manual_seed(5)
    logits = torch.randn(6, 4)
    assert len(prefix_beam_search(logits, beam_width=1)) == 1
    assert len(prefix_beam_search(logits, beam_width=3)) == 3
    # threshold above every non-blank probability: only the empty labelling can be formed
    probs = torch.tensor([[0.4, 0.3, 0.3]] * 3)
    assert prefix_beam_search(probs.log(), prune_threshold=0.5) == [((), pytest.approx(3 * math.log(0.4)))]


@pytest.mark.parametrize("seed", range(5))
def test_wide_beam_finds_the_most_probable_labelling(seed):
    torch.manual_seed(100 + seed)
    probs = torch.randn(1, 5, 3).mul(1.5).softmax(-1)
    totals = brute_force_labellings(probs[0])
    best = max(totals, key=totals.get)
    (text, conf), = beam_decode(probs.log(), AB, beam_width=64, prune_threshold=0.0)
    assert text == AB.decode(best)
    assert conf == pytest.approx(totals[best], rel=1e-5)


def test_sequence_log_likelihood_matches_brute_force():
    torch.manual_seed(7)
    probs = torch.randn(4, 3).softmax(-1)
    totals = brute_force_labellings(probs)
    labellings = [[], [1], [2, 1], [1, 1], [1, 2, 1, 2], [1, 1, 1, 1]]
    scores = sequence_log_likelihood(probs.log(), labellings)
    assert scores.dtype == torch.float64
    for lab, score in zip(labellings, scores.tolist()):
        expected = totals.get(tuple(lab), 0.0)
        assert math.exp(score) == pytest.approx(expected, rel=1e-5, abs=1e-12), lab


# ------------------------------------------------------------------ lexicon
def hello_logits(cs: Charset) -> torch.Tensor:
    """Posteriors whose best path reads "helo": the blank between the two l's is only 0.4."""
    steps = ["h", "e", "l", "-", "l", "o"]
    probs = torch.full((1, len(steps), cs.num_classes), 0.02)
    for t, ch in enumerate(steps):
        probs[0, t, 0 if ch == "-" else cs.index[ch]] = 0.9
    probs[0, 3, cs.index["l"]] = 0.6
    probs[0, 3, 0] = 0.4
    return (probs / probs.sum(-1, keepdim=True)).log()


def test_lexicon_picks_the_most_likely_word():
    cs = Charset.from_spec("alnum36")
    logits = hello_logits(cs)
    assert greedy_decode(logits, cs)[0][0] == "helo"
    (text, conf), = beam_decode(logits, cs, lexicon=["help", "HELLO", "world", "héllo"])
    assert text == "hello"
    assert math.log(conf) == pytest.approx(true_log_prob(logits[0].log_softmax(-1), "hello", cs), abs=1e-5)


def test_lexicon_prefilter_keeps_only_words_nearest_the_beam_result():
    cs = Charset.from_spec("alnum36")
    probs = torch.full((1, 4, cs.num_classes), 0.001)  # reads "ab", then two unsure steps
    probs[0, 0, cs.index["a"]] = probs[0, 1, cs.index["b"]] = 0.9
    probs[0, 2:, 0], probs[0, 2:, cs.index["a"]], probs[0, 2:, cs.index["b"]] = 0.5, 0.25, 0.25
    logits = probs.log()
    assert beam_decode(logits, cs)[0][0] == "ab"
    # "abab" is far more likely than "xb", but "xb" is nearer to "ab" in edit distance
    assert beam_decode(logits, cs, lexicon=["abab", "xb"])[0][0] == "abab"
    assert beam_decode(logits, cs, lexicon=["abab", "xb"], max_lexicon_candidates=1)[0][0] == "xb"


def test_lexicon_without_possible_word_falls_back_to_beam():
    cs = Charset.from_spec("alnum36")
    logits = hello_logits(cs)
    beam = beam_decode(logits, cs)
    assert beam_decode(logits, cs, lexicon=["abcdefghij", "ü"]) == beam  # too long / not spellable
    assert beam_decode(logits, cs, lexicon=[]) == beam


def test_lexicon_normalises_and_skips_words():
    lex = Lexicon(["Hello", "hello", "", "héllo", "ab1", "HELP"], Charset.from_spec("alnum36"))
    assert lex.words == ["hello", "ab1", "help"]
    assert len(lex) == 3
    assert Lexicon(["Hello"], Charset.from_spec("printable94")).words == ["Hello"]


def test_lexicon_nearest_matches_brute_force():
    rng = random.Random(0)
    cs = Charset("abcd")
    words = list(dict.fromkeys("".join(rng.choice("abcd") for _ in range(rng.randint(1, 7))) for _ in range(400)))
    lex = Lexicon(words, cs)
    for text in ["abc", "", "dddddddd", "badcab", "xa"]:
        assert lex.distances(text).tolist() == [edit_distance(w, text) for w in words], text
        for k in (1, 7, 50):
            expected = sorted(sorted(range(len(words)), key=lambda i: (edit_distance(words[i], text), i))[:k])
            assert lex.nearest(text, k) == expected, (text, k)
    assert lex.nearest("abc", 10_000) == list(range(len(words)))
    assert Lexicon([], cs).nearest("abc", 5) == [] and Lexicon([], cs).distances("ab").tolist() == []


def test_prebuilt_lexicon_is_reused_and_checked():
    cs = Charset.from_spec("alnum36")
    lex = Lexicon(["help", "hello", "world"], cs)
    assert beam_decode(hello_logits(cs), cs, lexicon=lex) == beam_decode(hello_logits(cs), cs, lexicon=lex.words)
    drop = Charset.from_spec("alnum36", unknown="drop")  # same alphabet, other policy: fine
    assert beam_decode(hello_logits(cs), drop, lexicon=lex) == beam_decode(hello_logits(cs), cs, lexicon=lex)
    with pytest.raises(ValueError, match="rebuild"):
        beam_decode(hello_logits(cs), Charset(cs.chars, lowercase=False), lexicon=lex)


# ------------------------------------------------------------------ word prior
def steps_logits(cs: Charset, steps: list[str], unsure: dict[int, dict[str, float]] = {}) -> torch.Tensor:
    """[1, T, C] log-probs: 0.9 on each step's char ("-" = blank), or the probabilities ``unsure[t]`` gives."""
    probs = torch.full((1, len(steps), cs.num_classes), 0.02)
    for t, ch in enumerate(steps):
        for c, p in unsure.get(t, {ch: 0.9}).items():
            probs[0, t, 0 if c == "-" else cs.index[c]] = p
    return (probs / probs.sum(-1, keepdim=True)).log()


def test_word_prior_takes_a_listed_reading_nearly_as_probable_as_the_best():
    cs = Charset.from_spec("alnum36")
    logits = hello_logits(cs)  # greedy "helo"; "hello" 0.4 nats behind in the beam
    (text, conf), = word_decode(logits, cs, words=["Hello", "world"])
    assert text == "hello"
    assert math.log(conf) == pytest.approx(true_log_prob(logits[0].log_softmax(-1), "hello", cs), abs=1e-5)
    assert word_decode(logits, cs, words=["hello"], margin=0.1) == greedy_decode(logits, cs)  # too far behind
    assert word_decode(logits, cs, words=["world"]) == greedy_decode(logits, cs)  # no listed reading in the beam


def test_word_prior_leaves_listed_readings_and_numbers_alone():
    cs = Charset.from_spec("alnum36")
    logits = hello_logits(cs)
    assert word_decode(logits, cs, words=["helo", "hello"]) == greedy_decode(logits, cs)  # greedy is a word
    digits = steps_logits(cs, ["h", "3", "l", "-", "l", "o"], {3: {"l": 0.6, "-": 0.4}})
    assert greedy_decode(digits, cs)[0][0] == "h3lo"
    assert word_decode(digits, cs, words=["h3llo"]) == greedy_decode(digits, cs)  # a code is never changed
    empty = steps_logits(cs, ["-", "-", "-"])
    assert word_decode(empty, cs, words=["a"]) == greedy_decode(empty, cs) and greedy_decode(empty, cs)[0][0] == ""


def test_word_prior_keeps_the_beams_case_and_punctuation():
    cs = Charset.from_spec("printable95")
    logits = steps_logits(cs, ["H", "e", "l", "-", "l", "o", "!"], {3: {"l": 0.6, "-": 0.4}})
    assert greedy_decode(logits, cs)[0][0] == "Helo!"
    assert word_decode(logits, cs, words=WordList(["hello"]))[0][0] == "Hello!"  # compared as 36-class "hello"


def test_word_prior_in_a_batch_equals_each_sample_alone_and_honours_lengths():
    cs = Charset.from_spec("alnum36")
    hello = hello_logits(cs)[0]  # [6, C]
    other = steps_logits(cs, ["c", "a", "t", "-", "x", "x"])[0]  # reads "catx"; "cat" with lengths 3
    batch = torch.stack([hello, other, hello])
    words = WordList(["hello", "cat"])
    got = word_decode(batch, cs, torch.tensor([6, 3, 6]), words=words)
    assert [t for t, _ in got] == ["hello", "cat", "hello"]
    assert got[1] == greedy_decode(other[None, :3], cs)[0]
    assert got[0] == word_decode(hello[None], cs, words=words)[0]


def test_word_list_keeps_the_36_class_form():
    words = WordList(["Word's\n", "  ", "---", "e-mail", "Café", "7up"], source="mine.txt")
    assert words.entries == {"words", "email", "caf", "7up"} and len(words) == 4
    assert "WORDS" in words and "E-Mail!" in words and "word" not in words and 3 not in words
    assert repr(words) == "WordList(4 words from mine.txt)"


def _weighed_reference(logits: torch.Tensor, cs: Charset, words: WordList) -> str:
    """The frequency rule without its skip: the beam's best reading of letters by log-prob + log10(count)."""
    (greedy, p), = greedy_decode(logits, cs)
    if not WordList.key(greedy).isalpha():
        return greedy
    nbest = [(cs.decode(list(ids)), s) for ids, s in prefix_beam_search(logits[0], beam_width=10)]
    own = [s for t, s in nbest if WordList.key(t) == WordList.key(greedy)]
    best, pick = (own[0] if own else math.log(p)) + words.weight(greedy), greedy
    for t, s in nbest:
        if WordList.key(t).isalpha() and WordList.key(t) != WordList.key(greedy) and s + words.weight(t) > best:
            best, pick = s + words.weight(t), t
    return pick


def test_word_prior_with_counts_weighs_each_reading_by_its_words_frequency():
    cs = Charset.from_spec("alnum36")
    logits = hello_logits(cs)  # greedy "helo"; "hello" g nats behind in the beam
    nbest = {cs.decode(list(ids)): s for ids, s in prefix_beam_search(logits[0], beam_width=10)}
    g = nbest["helo"] - nbest["hello"]
    assert 0.1 < g < 1
    # a listed greedy reading gives way to a word more frequent by more than a factor 10 ** g, not to one less so
    more, less = 10 ** (g + 0.05), 10 ** (g - 0.05)
    (text, conf), = word_decode(logits, cs, words={"helo": 1, "hello": more})
    assert text == "hello"
    assert math.log(conf) == pytest.approx(true_log_prob(logits[0].log_softmax(-1), "hello", cs), abs=1e-5)
    assert word_decode(logits, cs, words={"helo": 1, "hello": less}) == greedy_decode(logits, cs)
    # an unlisted reading counts as the rarest listed word ("zzz" here), whatever a frequent word elsewhere counts
    assert word_decode(logits, cs, words={"zzz": 1, "hello": more, "the": 1e9})[0][0] == "hello"
    assert word_decode(logits, cs, words={"zzz": 1, "hello": less, "the": 1e9}) == greedy_decode(logits, cs)
    # the margin is the plain list's rule only; codes are never changed
    assert word_decode(logits, cs, words={"helo": 1, "hello": more}, margin=0.01)[0][0] == "hello"
    digits = steps_logits(cs, ["h", "3", "l", "-", "l", "o"], {3: {"l": 0.6, "-": 0.4}})
    assert word_decode(digits, cs, words={"h3llo": 1e9, "a": 1}) == greedy_decode(digits, cs)


def test_word_prior_with_counts_skips_the_beam_only_where_no_reading_could_win():
    """The skip (greedy's probability too high for any other reading to win) never changes a reading: random
    posteriors over a few letters, random counts, against the rule without the skip."""
    cs = Charset.from_spec("alnum36")
    rng = random.Random(5)
    torch.manual_seed(5)
    changed = skipped = 0
    for trial in range(150):
        T = rng.randint(2, 7)
        logits = torch.full((1, T, cs.num_classes), -12.0)
        sharp = rng.choice([1.0, 3.0, 8.0])
        classes = [0] + [cs.index[ch] for ch in "abcde"]
        for c in classes:
            logits[0, :, c] = torch.randn(T) * sharp
        peak = rng.choice([0.0, 6.0, 12.0])  # a confident reading: most of them skip the beam
        for t in range(T):
            logits[0, t, rng.choice(classes)] += peak
        spread = rng.choice([1, 6])  # counts over one or six powers of ten
        vocab = {"".join(rng.choice("abcde") for _ in range(rng.randint(1, 4))): 10 ** rng.uniform(0, spread)
                 for _ in range(25)}
        words = WordList(vocab)
        got = word_decode(logits, cs, words=words)[0][0]
        assert got == _weighed_reference(logits, cs, words), trial
        greedy, p = greedy_decode(logits, cs)[0]
        changed += got != greedy
        skipped += p < 1 and math.log1p(-p) + words.top <= math.log(p) + words.weight(greedy)
    assert changed > 10 and skipped > 10  # both paths taken


def test_word_list_from_lines_reads_plain_and_frequency_lists():
    plain = WordList.from_lines(["Hello\n", "\n", "route 66\n", "New York"], source="a.txt")
    assert plain.entries == {"hello", "route66", "newyork"} and plain.log10_counts is None
    assert repr(plain) == "WordList(3 words from a.txt)"
    with pytest.raises(ValueError, match="no counts"):
        plain.weight("hello")
    counted = WordList.from_lines(["the\t1000\n", "The 100\n", "\n", "cafe's 10\n", "--- 5\n"], source="f.tsv")
    assert counted.entries == {"the", "cafes"} and repr(counted) == "WordList(2 words with counts from f.tsv)"
    assert counted.weight("THE") == pytest.approx(math.log10(1100)) and counted.weight("Cafe's!") == 1.0
    assert counted.weight("nowhere") == 1.0 == counted.floor and counted.top == pytest.approx(math.log10(1100))
    for bad, line in ((["the 10", "cat"], 2), (["the 10", "cat 0"], 2), (["\n", "a 1", "b 2", "c -3"], 4),
                      (["the 10", "cat dog 3"], 2)):
        with pytest.raises(ValueError, match=f"^f.tsv line {line}: .* give every line a count, or none$"):
            WordList.from_lines(bad, source="f.tsv")
    # other projects' frequency files: a header, commas or semicolons, a tab; a comment line is refused, not read
    # as a plain list of words glued to their counts
    for lines in (["word,count", "the,1000", "cat,10"], ["word\tfrequency", "the\t1000", "cat\t10"],
                  ["the ; 1000", "cat;10"]):
        got = WordList.from_lines(lines)
        assert got.log10_counts == {"the": 3.0, "cat": 1.0}, lines
    with pytest.raises(ValueError, match="^f.tsv line 2: '# counts per billion' is no 'word count' line, but most"):
        WordList.from_lines(["", "# counts per billion", "the 1000", "cat 10"], source="f.tsv")
    assert WordList.from_lines(["New York", "Paris"]).entries == {"newyork", "paris"}  # two words: no header
    with pytest.raises(ValueError, match="positive"):
        WordList({"the": 0})
    for count in (float("inf"), None, "many"):
        with pytest.raises(ValueError, match=f"^the count of 'the' must be a positive number, got {count!r}$"):
            WordList({"the": count})


def test_word_decoder_dispatch_and_errors():
    cs = Charset.from_spec("alnum36")
    logits = hello_logits(cs)
    assert decode(logits, cs, "word", words=["hello"]) == word_decode(logits, cs, words=["hello"])
    with pytest.raises(ValueError, match="needs a word list"):
        decode(logits, cs, "word")
    with pytest.raises(ValueError, match="beam_width"):
        word_decode(logits, cs, words=["hello"], beam_width=0)


# ------------------------------------------------------------------ dispatcher
def test_decode_dispatches_and_validates():
    logits = path_logits([[1, 0, 2]], 3)
    assert decode(logits, AB) == greedy_decode(logits, AB)
    assert decode(logits, AB, "beam", beam_width=2) == beam_decode(logits, AB, beam_width=2)
    with pytest.raises(ValueError, match="greedy, beam, word"):
        decode(logits, AB, "viterbi")
    with pytest.raises(TypeError, match="beam_width"):
        decode(logits, AB, "greedy", beam_width=2)
    with pytest.raises(ValueError, match="beam_width"):
        beam_decode(logits, AB, beam_width=0)


def test_pruned_beam_equals_full_beam_on_peaked_posteriors_with_a_large_alphabet():
    torch.manual_seed(3)
    cs = Charset("".join(chr(0x4E00 + i) for i in range(1500)))  # 1,501 classes of Hanzi
    paths = torch.randint(0, cs.num_classes, (3, 8))
    logits = torch.randn(3, 8, cs.num_classes)
    logits.scatter_(2, paths[..., None], 9.0)
    pruned = beam_decode(logits, cs, beam_width=4)  # top-4 characters of p >= 1e-3 per step
    full = beam_decode(logits, cs, beam_width=4, top_k=0, prune_threshold=0.0)  # every character every step
    assert [t for t, _ in pruned] == [t for t, _ in full] and all(len(t) > 2 for t, _ in pruned)
    assert [c for _, c in pruned] == pytest.approx([c for _, c in full], rel=1e-6)
    nbest_pruned = prefix_beam_search(logits[0], beam_width=4)
    nbest_full = prefix_beam_search(logits[0], beam_width=4, top_k=0, prune_threshold=0.0)
    assert [ids for ids, _ in nbest_pruned] == [ids for ids, _ in nbest_full]
