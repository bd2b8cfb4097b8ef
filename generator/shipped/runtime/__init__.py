"""A small typed runtime over these bindings: load a model, create a context, generate.

::

    from llama_bindings.runtime import Context, Model, Sampling
    from llama_bindings.runtime import SpeculativeDecoding, SpeculativeMode

    with Model("model.gguf", load_mtp=True) as model:
        spec = SpeculativeDecoding(SpeculativeMode.DRAFT_MTP)
        with Context(model, speculative=spec) as ctx:
            result = ctx.generate("Hello", max_tokens=64, on_token=print)
            print(result.text, result.metrics.acceptance_rate)
            for piece in ctx.stream("Once upon a time", max_tokens=32, stop=["\\n"]):
                print(piece, end="")  # exactly the result's text, stop strings never in part
            hi = [{"role": "user", "content": "Hi"}]
            reply = ctx.chat(hi, sampling=Sampling(temperature=0.7))  # the GGUF's template

Generation is greedy unless :class:`Sampling` (or a caller's own ``llama_sampler`` chain) says
otherwise; MTP verification samples with the same chain. Speculative decoding is off by default
(``SpeculativeDecoding()``, mode ``none``): the context then decodes one token per step with
``llama_decode``. With mode ``draft-mtp`` it drafts with the model's multi-token-prediction (NextN)
head through the ``llama_mtp`` wrapper, one ``llama_mtp_step`` call per verified step; greedy
output is upstream's ``llama-speculative-simple``'s token for token, and plain greedy's where
logits do not depend on the batch (see :class:`SpeculativeDecoding`). Combinations the MTP path
does not support raise :class:`LlamaUnsupportedError` with the reason.

After each generation the metrics (drafted and accepted tokens, acceptance rate, steps, tokens per
second) are logged at INFO level on the ``llama_bindings.runtime`` logger, with the llama.cpp tag
and whether MTP was on; never with file paths. llama.cpp's own log goes to the
``llama_bindings.llama_cpp`` logger, one record per line (so it is quiet unless logging is set up
to show it); ``Model(..., verbose=True)`` or :func:`set_llama_log` writes it to stderr instead, as
llama.cpp does by itself.
"""

from __future__ import annotations

# Every public name importable here when the runtime was one module still is (explicit
# re-exports, so type checkers see them too).
from .. import constants as constants
from .._about import LLAMA_CPP_RELEASE as LLAMA_CPP_RELEASE
from .._about import LOAD_MTP_PARAM as LOAD_MTP_PARAM
from .._about import MTP_API as MTP_API
from .._about import NEXTN_COUNT_FUNCTION as NEXTN_COUNT_FUNCTION
from .._ffi import SYMBOL_ERRORS as SYMBOL_ERRORS
from ..constants import GGML_LOG_LEVEL_CONT as GGML_LOG_LEVEL_CONT
from ..constants import GGML_LOG_LEVEL_DEBUG as GGML_LOG_LEVEL_DEBUG
from ..constants import GGML_LOG_LEVEL_ERROR as GGML_LOG_LEVEL_ERROR
from ..constants import GGML_LOG_LEVEL_INFO as GGML_LOG_LEVEL_INFO
from ..constants import GGML_LOG_LEVEL_WARN as GGML_LOG_LEVEL_WARN
from ..constants import LLAMA_DEFAULT_SEED as LLAMA_DEFAULT_SEED
from ..constants import MTP_DRAFT_CONTEXT as MTP_DRAFT_CONTEXT
from ..constants import MTP_STRATEGY_TYPES as MTP_STRATEGY_TYPES
from ..constants import SpeculativeMode as SpeculativeMode
from ..errors import LlamaChatParseError as LlamaChatParseError
from ..errors import LlamaClosedError as LlamaClosedError
from ..errors import LlamaLoadError as LlamaLoadError
from ..errors import LlamaMediaError as LlamaMediaError
from ..errors import LlamaQueueFullError as LlamaQueueFullError
from ..errors import LlamaRpcError as LlamaRpcError
from ..errors import LlamaRpcHandshakeError as LlamaRpcHandshakeError
from ..errors import LlamaRpcUnreachableError as LlamaRpcUnreachableError
from ..errors import LlamaRpcVersionError as LlamaRpcVersionError
from ..errors import LlamaRuntimeError as LlamaRuntimeError
from ..errors import LlamaSchemaError as LlamaSchemaError
from ..errors import LlamaSlotBusyError as LlamaSlotBusyError
from ..errors import LlamaStateError as LlamaStateError
from ..errors import LlamaUnsupportedError as LlamaUnsupportedError
from ..lifetimes import NativeObject as NativeObject
from ..loader import Libraries as Libraries
from ..loader import load as load
from ..outputs import TextPiece as TextPiece
from ..outputs import TokenLogprob as TokenLogprob
from ..outputs import check_top as check_top
from ..outputs import normalized as normalized
from ..outputs import token_logprob as token_logprob
from ..params import FLASH_ATTN_CHOICES as FLASH_ATTN_CHOICES
from ..params import RopeScaling as RopeScaling
from ..params import apply_rope as apply_rope
from ..params import check_count as check_count
from ..params import check_flag as check_flag
from ..params import choose as choose
from ..params import enum_name as enum_name
from ..params import ggml_type as ggml_type
from ..params import requested_settings as requested_settings
from ..params import set_field as set_field
from .adapters import ControlVectorData as ControlVectorData
from .adapters import LoraAdapter as LoraAdapter
from .chat_layer import ChatTemplates as ChatTemplates
from .chat_layer import GrammarTrigger as GrammarTrigger
from .chat_layer import RenderedChat as RenderedChat
from .chat_layer import json_schema_to_grammar as json_schema_to_grammar
from .chat_request import ChatDelta as ChatDelta
from .chat_request import ChatOptions as ChatOptions
from .chat_request import ChatResult as ChatResult
from .chat_request import ChatStream as ChatStream
from .chat_request import ToolCall as ToolCall
from .chat_request import ToolCallDelta as ToolCallDelta
from .context import LOGGER as LOGGER
from .context import Context as Context
from .devices import Device as Device
from .devices import list_devices as list_devices
from .devices import wait_for_rpc_server as wait_for_rpc_server
from .generation import GenerateOptions as GenerateOptions
from .llama_log import LLAMA_LOGGER as LLAMA_LOGGER
from .llama_log import set_llama_log as set_llama_log
from .media import MediaInput as MediaInput
from .media import MediaPrompt as MediaPrompt
from .media import Projector as Projector
from .model import Model as Model
from .results import LLAMA_CPP_TAG as LLAMA_CPP_TAG
from .results import TAIL_TOKEN as TAIL_TOKEN
from .results import Cancellation as Cancellation
from .results import ChatMessage as ChatMessage
from .results import ChatMessages as ChatMessages
from .results import ChatTemplateError as ChatTemplateError
from .results import FinishReason as FinishReason
from .results import GenerationMetrics as GenerationMetrics
from .results import GenerationResult as GenerationResult
from .results import PromptReuse as PromptReuse
from .results import StrategyMetrics as StrategyMetrics
from .results import Stream as Stream
from .results import TokenCallback as TokenCallback
from .sampling import Grammar as Grammar
from .sampling import Sampling as Sampling
from .slots import RequestTimes as RequestTimes
from .slots import Slots as Slots
from .slots import SlotStats as SlotStats
from .speculative import SpeculativeDecoding as SpeculativeDecoding
from .speculative import Strategy as Strategy
from .speculative import strategy_support as strategy_support
