#!/usr/bin/env python3
"""Times single searches, one at a time, by the frequency band of their words.

Usage: search_bands.py URL EVENTS [--samples N]

URL is a running svc (started with --cache-mb 0, so that every answer is read from the
catalog). The words are those of the generated records (search_words.py), ranked by
frequency, in four bands: the top 10, ranks 11-100, around the median rank, and rare words
(seen at most 3 times). For each band and shape (one word as typed, so also a prefix; one
word ended by a space; two words; a quoted two-word phrase of a record's name; a word's first
four letters; one word with a kind filter), N searches (default 40) with words drawn from the
band: p50, p99 and the largest, in ms, and the commonest `total`. Each query is asked once:
nothing is answered from a cache."""
import http.client, json, random, sys, time, urllib.parse

import search_words


def bands(words):
    ranked = [w for w, _ in words.most_common()]
    middle = len(ranked) // 2
    return {
        "top 10": ranked[:10],
        "top 100": ranked[10:100],
        "median": ranked[max(0, middle - 50) : middle + 50],
        "rare": [w for w, n in words.items() if n <= 3][:2000] or ranked[-100:],
    }


def shapes(rnd, band, by_kind, names):
    """Each shape's query maker: () -> params."""
    band_set = set(band)
    phrases = [n for n in names if n.split()[0] in band_set] or names
    kinds = sorted(by_kind)

    def with_kind():
        word = rnd.choice(band)
        holding = [k for k in kinds if by_kind[k][word]] or kinds
        return {"q": word, "kind": rnd.choice(holding)}

    return {
        "word": lambda: {"q": rnd.choice(band)},
        "word, ended": lambda: {"q": rnd.choice(band) + " "},
        "two words": lambda: {"q": "%s %s" % (rnd.choice(band), rnd.choice(band))},
        "phrase": lambda: {"q": '"%s"' % rnd.choice(phrases)},
        "start (4)": lambda: {"q": rnd.choice([w for w in band if len(w) >= 4] or band)[:4]},
        "word + kind": with_kind,
    }


def main(argv):
    url, events = urllib.parse.urlparse(argv[1]), argv[2]
    samples = int(argv[argv.index("--samples") + 1]) if "--samples" in argv else 40
    words, by_kind, names = search_words.read(events)
    rnd = random.Random(11)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    asked = set()
    print("%-8s %-12s %8s %8s %8s %8s" % ("band", "shape", "p50 ms", "p99 ms", "max ms", "total"))
    worst = 0.0
    for band_name, band in bands(words).items():
        for shape, make in shapes(rnd, band, by_kind, names).items():
            times, totals = [], []
            for _ in range(samples * 4):
                if len(times) == samples:
                    break
                params = make()
                path = "/v1/search?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)
                if path in asked:
                    continue
                asked.add(path)
                start = time.perf_counter()
                conn.request("GET", path)
                answer = conn.getresponse()
                body = answer.read()
                took = (time.perf_counter() - start) * 1000
                if answer.status != 200:
                    print("%s: %d %s" % (path, answer.status, body[:200]), file=sys.stderr)
                    continue
                if took > 10 and "--slow" in argv:
                    print("slow: %.1f ms %s" % (took, urllib.parse.unquote(path)), file=sys.stderr)
                times.append(took)
                totals.append(json.loads(body).get("total", 0))
            if not times:
                continue
            times.sort()
            p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
            worst = max(worst, p99)
            common_total = max(set(totals), key=totals.count)
            print("%-8s %-12s %8.1f %8.1f %8.1f %8d" % (
                band_name, shape, times[len(times) // 2], p99, times[-1], common_total))
    print("bands: worst p99 %.1f ms" % worst)


if __name__ == "__main__":
    main(sys.argv)
