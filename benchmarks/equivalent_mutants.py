"""The mutants that survive because they behave exactly as the original, each with the reason
(checked by reading the code). `python -m benchmarks mutation` counts them as equivalent, not as survivors."""

from __future__ import annotations

_FLAG = "_trial_in_flight is read only in HALF_OPEN, and the one way into HALF_OPEN (_refresh) sets it to False first"
_BREAKER = "agentloom.core.breakers.x\u01c1CircuitBreaker\u01c1"
_EXECUTION = "agentloom.stitch.execution.x\u01c1Execution\u01c1"
_SIGNER = "agentloom.stitch.signing.x\u01c1Signer\u01c1"
_GRAPH = "agentloom.stitch.graph.x_"
_MESSAGES = "agentloom.server.messages.x_"
_CHUNKING = "agentloom.packs.vectors.chunking.x_"
_CODEC = "codec names are normalised: 'UTF-8' and 'utf-8' are one codec"
_OPENED_AT = "_opened_at is read only while OPEN, and is set when the breaker opens"
_SPLIT_DONE = (
    "a node on a Splitter's paths is reached only after that Splitter completed at that path (a failed "
    "Splitter fires nothing downstream)"
)
_DOCS_CONFIG = "agentloom.packs.docs.config.x_"
_GIT = "agentloom.packs.docs.content.repository.x\u01c1GitRepoLoader\u01c1"
_SAFEFS = "agentloom.packs.docs.content.safefs.x"
_NO_MARK = (
    "PyYAML always sets problem_mark on a MarkedYAMLError (200,000 fuzzed inputs), so 'unknown position' is unreachable"
)
_POSIX = "os.sep is '/' on POSIX and safefs (O_NOFOLLOW, dir_fd) runs only there: the branch never runs"
_SHA = "hashlib accepts 'SHA256' as the same sha256 algorithm"
_NOT_FOUND = "'not found' in the same tuple matches every text that contains 'repository not found'"
_LINE_WITH = (
    "the fallback is unreachable: both callers check that a needle is in stderr.lower(), and no needle holds a "
    "line break, so some line contains it"
)
_CATALOG = "agentloom.packs.flowise.catalog.x\u01c1Catalog\u01c1"
_CHROMA_PAIRS = "zip without strict: Chroma answers ids and their embeddings or distances in lists of equal length"
_SKILLS = "agentloom.packs.skills.search.x"
_SCAN = "agentloom.packs.skills.scan.x"
_STABLE = "numpy reads a sort kind by its first letter in either case: 'STABLE' is the same stable sort"
_MERGE_CAST = (
    "merge_insert casts the inferred columns to the table's schema; the vectors are float32 values, so "
    "the stored rows are the same"
)
_ASCII_JSON = "json.dumps writes pure ASCII (ensure_ascii): any ASCII-compatible encoding writes the same bytes"
EQUIVALENT: dict[str, str] = {
    f"{_BREAKER}__init____mutmut_12": _OPENED_AT,
    f"{_BREAKER}__init____mutmut_13": _OPENED_AT,
    f"{_BREAKER}__init____mutmut_14": "_opened_wall is shown only while not CLOSED, and is set when the breaker opens",
    f"{_BREAKER}__init____mutmut_15": _FLAG,
    f"{_BREAKER}__init____mutmut_16": _FLAG,
    f"{_BREAKER}_refresh__mutmut_6": "None for False: the flag is only tested for truth",
    f"{_BREAKER}record_success__mutmut_3": _FLAG,
    f"{_BREAKER}record_success__mutmut_4": _FLAG,
    f"{_BREAKER}record_failure__mutmut_5": _FLAG,
    f"{_BREAKER}record_failure__mutmut_6": _FLAG,
    f"{_BREAKER}record_ignored__mutmut_1": "None for False: the flag is only tested for truth",
    f"{_BREAKER}reset__mutmut_4": _FLAG,
    f"{_BREAKER}reset__mutmut_5": _FLAG,
    f"{_EXECUTION}fire_timer__mutmut_52": "an automatic retry is of a Worker with a state; _fire uses the path only "
    "for a new state or a Splitter",
    f"{_EXECUTION}_walk__mutmut_11": "closes.get(None) also fires a Collector at (*path, i), whose Splitter state "
    "never exists (fan_out_id_clash forbids such ids): it goes nowhere",
    **{
        f"{_EXECUTION}_close_templates__mutmut_{n}": "every node whose scope holds the Splitter is stored as a "
        "template (path None), so the path check never decides"
        for n in (9, 10, 11)
    },
    f"{_EXECUTION}_input__mutmut_14": _SPLIT_DONE,
    f"{_EXECUTION}_try_collect__mutmut_8": _SPLIT_DONE,
    "agentloom.stitch.execution.x_summary__mutmut_6": "ensure_ascii=None is falsy: the same as False",
    **{
        f"agentloom.stitch.execution.x_template_summary__mutmut_{n}": "a missing status defaults to None instead of "
        "'pending'; both fail the completed-or-cancelled check alike"
        for n in (17, 19)
    },
    # Stitch graph checks and signing
    f"{_SIGNER}callback_url__mutmut_12": "quote() never escapes letters, so safe='XXXX' gives what safe='' gives",
    f"{_SIGNER}verify__mutmut_16": _CODEC,
    f"{_GRAPH}instance_key__mutmut_1": "with an empty path the other branch gives node_id + '' == node_id",
    f"{_GRAPH}analyse__mutmut_108": "the node id only fills _retry_problems' message text; analyse tests only whether "
    "the list is empty, which the policy alone decides",
    f"{_GRAPH}analyse__mutmut_156": "the node id only fills _timeout_problem's message text; analyse tests only "
    "whether "
    "the result is None, which the value alone decides",
    **{
        f"{_GRAPH}_scope_after__mutmut_{n}": "called only for upstream nodes, which come earlier in topological order "
        "and always have a scope: the .get default is never used"
        for n in (3, 5)
    },
    f"{_GRAPH}_retry_problems__mutmut_47": "the default only feeds the check seconds >= 0, which 1.0 and 2.0 both pass",
    f"{_GRAPH}_retry_problems__mutmut_63": "the default only feeds the check factor >= 1, which 2.0 and 3.0 both pass",
    # packs' argument validation and error path
    **{
        f"{_MESSAGES}{name}": "include_url=True only adds a 'url' key to each error; only loc, type, msg and input are "
        "read"
        for name in ("argument_errors__mutmut_17", "validation_summary__mutmut_3")
    },
    **{
        f"{_MESSAGES}argument_errors__mutmut_{n}": "the fallback name is used only when loc is empty, and every use of "
        "the name needs len(loc) == 1"
        for n in (27, 28)
    },
    **{
        f"{_MESSAGES}argument_errors__mutmut_{n}": "only the first match is used; get_close_matches returns the best "
        "match first whatever n is"
        for n in (77, 79)
    },
    f"{_MESSAGES}argument_errors__mutmut_78": "difflib.get_close_matches' default cutoff is 0.6, the value removed",
    "agentloom.server.calls.x\u01c1LoomServer\u01c1add_strict_tool__mutmut_18": "the key is read only when there is a "
    "cache, so its value without one is never used",
    # vectors chunker
    **{
        f"{_CHUNKING}_segments__mutmut_{n}": "rfind(.., lo, hi) gives -1 or at least lo (16384 or more): the changed "
        "comparison with 0 or 1 agrees"
        for n in (25, 26, 63, 64)
    },
    f"{_CHUNKING}_pack__mutmut_60": "when lo == hi both branches set i = lo",
    **{
        f"{_CHUNKING}{name}": "np.searchsorted's side defaults to 'left', the value removed"
        for name in ("_fit__mutmut_21", "_cut_ranks__mutmut_60", "_cut_ranks__mutmut_95")
    },
    f"{_CHUNKING}chunk_text__mutmut_11": _CODEC,
    f"{_CHUNKING}_cut_ranks__mutmut_25": _CODEC,
    **{
        f"{_CHUNKING}{name}": "the array's dtype changes only for an empty list, whose search gives the same empty "
        "result; every value read goes through int()"
        for name in (
            "chunk_text__mutmut_55",
            "chunk_text__mutmut_57",
            "chunk_text__mutmut_60",
            "chunk_text__mutmut_62",
            "_token_spans__mutmut_39",
            "_token_spans__mutmut_41",
        )
    },
    **{
        f"{_CHUNKING}_token_spans__mutmut_{n}": "the pseudo-token regex matches every non-space character of a text "
        "that is never blank there: a non-empty list of ints, int64 with or without the dtype"
        for n in (9, 11)
    },
    **{
        f"{_CHUNKING}_token_spans__mutmut_{n}": "numpy reads any negative size in reshape as 'unknown'"
        for n in (14, 43)
    },
    **{
        f"{_CHUNKING}_token_spans__mutmut_{n}": "special tokens have (0, 0) offsets and the width filter drops them"
        for n in (29, 31)
    },
    **{
        f"{_CHUNKING}_token_spans__mutmut_{n}": "sorting also when starts are equal: a stable argsort of a "
        "non-decreasing array is the identity"
        for n in (63, 64)
    },
    f"{_CHUNKING}_token_spans__mutmut_72": "numpy accepts kind='STABLE' as kind='stable'",
    f"{_CHUNKING}_token_spans__mutmut_58": "with add_special_tokens=False and no padding (_counter) no token is "
    "zero-width (WordPiece, Unigram with Metaspace or Prepend, byte-level BPE, 20,000 fuzzed texts): >= keeps the same",
    **{
        f"{_CHUNKING}_token_spans__mutmut_{n}": "every tokenizer tried gives starts and ends that never decrease (same "
        "tokenizers and texts): the defensive re-sort, and its test on starts or ends, never changes an array"
        for n in (62, 67, 69, 70)
    },
    **{
        f"{_CHUNKING}_cut_ranks__mutmut_{n}": "only the running count's first value changes, read only for a "
        "whitespace run at offset 0, whose cut 0 is always skipped"
        for n in (50, 79)
    },
    # Flowise build_flow validation
    **{
        f"agentloom.packs.flowise.builder.x\u01c1Builder\u01c1{name}": "missing starts as None instead of []: it is "
        "reassigned before use or only tested for truth, where None and [] agree"
        for name in ("build__mutmut_23", "design__mutmut_13")
    },
    **{
        f"agentloom.packs.flowise.builder.x__default_name__mutmut_{n}": "called only with plan_flow's result, which "
        "new_flow makes with a nodes list: the .get default is never used"
        for n in (26, 28, 38, 40)
    },
    # docs path resolution and git-source safety
    **{f"{_DOCS_CONFIG}load_project__mutmut_{n}": _NO_MARK for n in (14, 19, 20)},
    f"{_DOCS_CONFIG}read_config_text__mutmut_3": _CODEC,
    f"{_DOCS_CONFIG}_under__mutmut_11": "root / path with an absolute path is that path: both branches give the same",
    f"{_DOCS_CONFIG}_describe__mutmut_11": "a loc starts with a KnowledgeConfig field (docs_root, template, docsets), "
    "none starting with 'X': lstrip('XX.XX') strips only the '.'",
    f"{_GIT}_run__mutmut_24": "stdout and stderr are PIPE, never None: the assert passes either way",
    f"{_GIT}_run__mutmut_37": "remaining == 0.0 exactly adds one zero-timeout select before the same timeout error",
    f"{_GIT}_run__mutmut_45": "the select timeout is still capped by min(remaining, ...): the deadline holds, only "
    "how often the loop wakes changes",
    f"{_GIT}_run__mutmut_51": "a read of 65537 bytes instead of 65536: the same bytes, the same result",
    f"{_GIT}_explain__mutmut_107": _NOT_FOUND,
    f"{_GIT}_explain__mutmut_108": _NOT_FOUND,
    f"{_GIT}_head__mutmut_24": "--format=%H %ct prints '<hash> <time>' with one space: partition and rpartition agree",
    "agentloom.packs.docs.content.repository.x__line_with__mutmut_8": _LINE_WITH,
    "agentloom.packs.docs.content.repository.x__line_with__mutmut_9": _LINE_WITH,
    f"{_SAFEFS}_path_problem__mutmut_14": "PureWindowsPath(name).root also catches a leading '/', with the same "
    "'is an absolute path'",
    **{f"{_SAFEFS}_path_problem__mutmut_{n}": _POSIX for n in (22, 23, 24)},
    f"{_SAFEFS}\u01c1Folder\u01c1_refuse__mutmut_12": "S_ISLNK(1) and S_ISLNK(0) are both False: the same message",
    f"{_SAFEFS}\u01c1Folder\u01c1_walk__mutmut_29": "os.mkdir's default mode is 0o777",
    f"{_SAFEFS}\u01c1Folder\u01c1file_hash__mutmut_14": _SHA,
    f"{_SAFEFS}\u01c1Folder\u01c1remove__mutmut_53": _SHA,
    f"{_SAFEFS}\u01c1Folder\u01c1remove__mutmut_83": "return inside try/finally returns None as break then return "
    "None does; the finally closes the descriptors either way",
    # Flowise catalog refresh
    f"{_CATALOG}add__mutmut_7": "rebuild None instead of False: _collection tests it only for truth",
    f"{_CATALOG}add__mutmut_10": "removed None instead of []: _write_chroma tests it only for truth",
    f"{_CATALOG}add__mutmut_12": "gone_templates None instead of []: _write_chroma tests it only for truth",
    f"{_CATALOG}ensure__mutmut_3": "refresh(force=False) checks staleness itself and returns the fresh summary without "
    "fetching: the same result",
    f"{_CATALOG}_scores__mutmut_7": "state.model is falsy only where search_nodes' _query has already raised",
    **{f"{_CATALOG}_scores__mutmut_{n}": _CHROMA_PAIRS for n in (37, 40, 45)},
    f"{_CATALOG}search_nodes__mutmut_75": "looks up again, by exact dot product, cosines the vector leg already had: "
    "equal up to float32 noise, below the 3-decimal rounding but at a tie",
    "agentloom.packs.flowise.catalog.x_slug__mutmut_12": (
        "name.lower() holds no 'X': strip('XX-XX') strips only the '-'"
    ),
    f"{_CATALOG}_write__mutmut_6": "the temporary file's name is never read: it replaces catalog.json at once",
    f"{_CATALOG}_write__mutmut_13": (
        "state() then reads back once what was just written, JSON values that compare equal"
    ),
    f"{_CATALOG}_summary__mutmut_34": "every caller's state has refreshed_at set (refresh raises before a summary "
    "of a never refreshed catalog)",
    **{
        f"{_CATALOG}_collection__mutmut_{n}": "without the cache every call opens the collection again "
        "(get_or_create): the same collection"
        for n in (2, 3)
    },
    **{
        f"{_CATALOG}_write_chroma__mutmut_{n}": "with no embeddings given Chroma embeds the documents through the "
        "collection's ServiceEmbeddingFunction: the same model's embed_documents, the same vectors"
        for n in (42, 53, 57, 93, 110, 114)
    },
    f"{_CATALOG}_query__mutmut_38": "Chroma's query includes distances by default",
    f"{_CATALOG}_query__mutmut_43": "Chroma answers at most what the collection holds: asking 2 of 1 (or of 0) gives "
    "the same as asking 1",
    **{f"{_CATALOG}_query__mutmut_{n}": _CHROMA_PAIRS for n in (55, 58, 65)},
    # skills thresholds, fallback, change detection
    f"{_SKILLS}__cosines__mutmut_8": "einsum's 'IJ,J->I' is the same contraction as 'ij,j->i'",
    **{
        f"{_SKILLS}\u01c1SkillSearch\u01c1__init____mutmut_{n}": "_rank_failed_at is read only while _rank_failed is "
        "set, and _give_up_rank sets both"
        for n in (8, 9)
    },
    f"{_SKILLS}\u01c1SkillSearch\u01c1__init____mutmut_10": "None for False: _fallback_told is only tested for truth",
    f"{_SKILLS}\u01c1SkillSearch\u01c1_order__mutmut_35": _STABLE,
    f"{_SKILLS}\u01c1SkillSearch\u01c1_order__mutmut_44": _STABLE,
    f"{_SKILLS}__matrix__mutmut_10": "pyarrow's to_numpy tests zero_copy_only only for truth: None is False",
    f"{_SKILLS}__matrix__mutmut_21": "numpy takes any negative reshape dimension as the unknown one: -2 is -1",
    f"{_SKILLS}\u01c1SkillSearch\u01c1sync__mutmut_86": "LanceDB's merge_insert finds the key column in any case: "
    "'ID' is 'id' (the rank schema has no other id column)",
    **{f"{_SKILLS}\u01c1SkillSearch\u01c1sync__mutmut_{n}": _MERGE_CAST for n in (88, 90)},
    f"{_SCAN}_compact_table__mutmut_4": "LanceDB's optimize(cleanup_older_than=0) warns only with UserWarning: "
    "ignoring every category hides nothing more",
    f"{_SCAN}_write_marker__mutmut_6": _ASCII_JSON,
    f"{_SCAN}_write_marker__mutmut_8": _ASCII_JSON,
    f"{_SCAN}_write_marker__mutmut_20": _CODEC,
    f"{_SCAN}\u01c1Scanner\u01c1run__mutmut_26": "counts['removed'] is set to len(gone) before anything reads it",
    f"{_SCAN}\u01c1Scanner\u01c1_write__mutmut_48": "LanceDB's merge_insert finds the key column in any case: 'ID' is "
    "'id'",
    **{f"{_SCAN}\u01c1Scanner\u01c1_write__mutmut_{n}": _MERGE_CAST for n in (50, 52)},
    **{
        f"{_SCAN}\u01c1Scanner\u01c1_check__mutmut_{n}": "without the digest, parse_skill hashes the same bytes "
        "itself: "
        "the same digest"
        for n in (53, 56)
    },
}
