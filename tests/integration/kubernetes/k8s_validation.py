"""Request-body validation for the FAKE Kubernetes API server (fake_apiserver.py).

Two layers, as the real kube-apiserver has them:

1. Decoding against the OpenAPI schema. The schema is not written here: it is read from the
   generated models of Debian's python3-kubernetes (the official client), walking each model
   class's `openapi_types` / `attribute_map` recursively (`list[V1Container]`,
   `dict(str, str)`, primitives, `object`, `datetime`). Unknown fields give the same 400 as
   `fieldValidation=Strict` (`strict decoding error: unknown field "spec.containers[0].foo"`),
   a wrong JSON type the decoder's 400 (`json: cannot unmarshal ...`), an unparsable quantity
   the quantity decoder's 400; fields the models' setters refuse as `None` (client-side
   validation) are reported 422 `Required value`.
2. The API server's semantic validation a provider can get wrong (names, labels, annotations,
   containers, volumes, ports, resources, enums): 422 Invalid with `details.causes`, the
   messages copied from k8s.io/apimachinery's validation package.
"""
from __future__ import annotations

import inspect
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Optional

import kubernetes.client.models as k8s_models  # Debian's python3-kubernetes

JSON = Any


class ApiError(Exception):
    """An error the API server answers as a `Status` object."""

    def __init__(self, code: int, reason: str, message: str,
                 details: Optional[dict[str, Any]] = None,
                 headers: Optional[dict[str, str]] = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        """The `Status` object the real server sends for this error."""
        out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Failure", "message": self.message,
                               "reason": self.reason, "code": self.code}
        if self.details is not None:
            out["details"] = self.details
        return out


# ---------------------------------------------------------------- schema walk (layer 1)

_REQUIRED_CACHE: dict[type, frozenset[str]] = {}


def required_fields(cls: type) -> frozenset[str]:
    """The JSON names of the fields a model's setter refuses as None (client-side validation:
    the generated setter raises ValueError("Invalid value for `x`, must not be `None`"))."""
    if cls not in _REQUIRED_CACHE:
        req = set()
        for attr in cls.openapi_types:
            prop = getattr(cls, attr, None)
            setter = getattr(prop, "fset", None)
            if setter is None:
                continue
            try:
                src = inspect.getsource(setter)
            except (OSError, TypeError):
                continue
            if "must not be `None`" in src:
                req.add(cls.attribute_map[attr])
        _REQUIRED_CACHE[cls] = frozenset(req)
    return _REQUIRED_CACHE[cls]


def _json_kind(v: JSON) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


def _go_type(typ: str) -> str:
    if typ.startswith("list["):
        return "[]" + _go_type(typ[5:-1])
    if typ.startswith("dict("):
        return "map[string]" + _go_type(typ[5:-1].split(",", 1)[1].strip())
    return {"str": "string", "int": "int32", "float": "float64", "bool": "bool",
            "object": "interface {}", "datetime": "v1.Time", "date": "v1.Time"}.get(
                typ, "v1." + re.sub(r"^V\d+((alpha|beta)\d+)?", "", typ))


# Fields whose Go type is resource.Quantity: strings in the models, but the decoder also
# takes JSON numbers and parses the text.
_QUANTITY_PARENTS = {"limits", "requests", "capacity", "allocatable", "hard", "used"}
_QUANTITY_FIELDS = {"sizeLimit"}
QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
QUANTITY_MSG = ("quantities must match the regular expression "
                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
_SUFFIX = {"": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
           "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def parse_quantity(text: JSON) -> Decimal:
    """resource.Quantity's parser: `100m`, `512Mi`, `1Gi`, `0.5`, `1e3`. ValueError if bad."""
    if isinstance(text, bool):
        raise ValueError(QUANTITY_MSG)
    if isinstance(text, (int, float)):
        return Decimal(str(text))
    m = re.fullmatch(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                     r"(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?", str(text))
    if not m:
        raise ValueError(QUANTITY_MSG)
    try:
        num = Decimal(m.group(1))
    except InvalidOperation as e:
        raise ValueError(QUANTITY_MSG) from e
    suf = m.group(2) or ""
    if suf[:1] in ("e", "E"):
        return num * (Decimal(10) ** int(suf[1:]))
    return num * Decimal(_SUFFIX[suf])


class SchemaWalk:
    """One body's walk against a model class: unknown fields, type errors, missing required."""

    def __init__(self, kind: str, prune: bool = False) -> None:
        self.kind = kind
        self.prune = prune  # drop unknown fields from the body (fieldValidation Ignore/Warn)
        self.unknown: list[str] = []
        self.type_error: Optional[str] = None
        self.missing: list[str] = []

    def walk(self, value: JSON, typ: str, path: str, gopath: str, struct: str) -> None:
        if self.type_error:
            return
        if value is None:
            return  # JSON null decodes to the zero value
        if typ.startswith("list["):
            if not isinstance(value, list):
                return self._type(value, typ, gopath, struct)
            for i, item in enumerate(value):
                self.walk(item, typ[5:-1], "%s[%d]" % (path, i), gopath, struct)
            return
        if typ.startswith("dict("):
            if not isinstance(value, dict):
                return self._type(value, typ, gopath, struct)
            inner = typ[5:-1].split(",", 1)[1].strip()
            for k, v in value.items():
                self.walk(v, inner, "%s[%s]" % (path, k), gopath, struct)
            return
        m = re.search(r"(\w+)\[[^\[\]]*\]$", path)
        is_quantity = typ == "str" and (
            (m is not None and m.group(1) in _QUANTITY_PARENTS) or
            path.rsplit(".", 1)[-1] in _QUANTITY_FIELDS)
        if is_quantity:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                return self._type(value, typ, gopath, struct)
            try:
                parse_quantity(value)
            except ValueError:
                self.type_error = QUANTITY_MSG
            return
        if typ == "str" or typ in ("datetime", "date"):
            if not isinstance(value, str):
                return self._type(value, typ, gopath, struct)
            return
        if typ == "int":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    (isinstance(value, float) and not value.is_integer()):
                return self._type(value, typ, gopath, struct)
            return
        if typ == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return self._type(value, typ, gopath, struct)
            return
        if typ == "bool":
            if not isinstance(value, bool):
                return self._type(value, typ, gopath, struct)
            return
        if typ == "object":
            return
        cls = getattr(k8s_models, typ, None)
        if cls is None:
            return  # a type the models do not describe: accept, as `object`
        if not isinstance(value, dict):
            return self._type(value, typ, gopath, struct)
        by_json = {j: a for a, j in cls.attribute_map.items()}
        for key, v in list(value.items()):
            sub = key if not path else path + "." + key
            if key not in by_json:
                self.unknown.append(sub)
                if self.prune:
                    del value[key]
                continue
            self.walk(v, cls.openapi_types[by_json[key]], sub,
                      key if not gopath else gopath + "." + key,
                      re.sub(r"^V\d+((alpha|beta)\d+)?", "", typ))
        for req in sorted(required_fields(cls)):
            if value.get(req) is None and req not in ("apiVersion", "kind"):
                self.missing.append(req if not path else path + "." + req)

    def _type(self, value: JSON, typ: str, gopath: str, struct: str) -> None:
        self.type_error = ("json: cannot unmarshal %s into Go struct field %s.%s of type %s"
                           % (_json_kind(value), struct or self.kind, gopath, _go_type(typ)))


def check_schema(body: JSON, model: str, kind: str, name: str,
                 field_validation: str = "Strict") -> list[str]:
    """Layer 1: raise the real server's 400/422 for `body` against model class `model`.
    fieldValidation Strict: unknown fields are a 400; Warn: dropped, returned as warnings (the
    server's `Warning` headers); Ignore: dropped silently."""
    if field_validation not in ("Strict", "Warn", "Ignore"):
        raise ApiError(400, "BadRequest", 'fieldValidation must be one of "Ignore", "Warn", or '
                       '"Strict"; got "%s"' % field_validation)
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", "couldn't get version/kind; json parse error: "
                       "json: cannot unmarshal %s into Go value of type struct { APIVersion "
                       "string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string "
                       "\"json:\\\"kind,omitempty\\\"\" }" % _json_kind(body))
    w = SchemaWalk(kind, prune=field_validation != "Strict")
    w.walk(body, model, "", "", kind)
    if w.type_error:
        raise ApiError(400, "BadRequest", '%s in version "v1" cannot be handled as a %s: %s'
                       % (kind, kind, w.type_error))
    if w.unknown and field_validation == "Strict":
        raise ApiError(400, "BadRequest", "strict decoding error: " + ", ".join(
            'unknown field "%s"' % u for u in w.unknown))
    if w.missing:
        raise invalid(kind, name, [Cause("FieldValueRequired", f, "Required value")
                                   for f in w.missing])
    return ['unknown field "%s"' % u for u in w.unknown] if field_validation == "Warn" else []


# ---------------------------------------------------------------- semantic checks (layer 2)

class Cause:
    """One field error, as apimachinery's field.Error."""

    def __init__(self, reason: str, field: str, message: str) -> None:
        self.reason, self.field, self.message = reason, field, message

    def text(self) -> str:
        return "%s: %s" % (self.field, self.message)


def invalid(kind: str, name: str, causes: list[Cause]) -> ApiError:
    """422 Invalid with details.causes, the message as NewInvalid formats it."""
    texts = [c.text() for c in causes]
    msg = '%s "%s" is invalid: %s' % (kind, name, texts[0] if len(texts) == 1
                                       else "[" + ", ".join(texts) + "]")
    return ApiError(422, "Invalid", msg, {
        "name": name, "kind": kind,
        "causes": [{"reason": c.reason, "message": c.message, "field": c.field}
                   for c in causes]})


DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = DNS1123_LABEL + r"(\." + DNS1123_LABEL + ")*"
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
             "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
             "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric "
                 "character (e.g. 'example.com', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
QNAME_RE = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QNAME_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
             "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
             "or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABELVAL_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
ENV_RE = r"[-._a-zA-Z][-._a-zA-Z0-9]*"
ENV_MSG = ("a valid environment variable name must consist of alphabetic characters, digits, "
           "'_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or "
           "'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is "
           "'[-._a-zA-Z][-._a-zA-Z0-9]*')")


def _q(v: JSON) -> str:
    """Go's %q-ish rendering of an invalid value."""
    if isinstance(v, str):
        return '"%s"' % v.replace("\\", "\\\\").replace('"', '\\"')
    return str(v).lower() if isinstance(v, bool) else str(v)


class Checker:
    """Collects field errors for one object."""

    def __init__(self) -> None:
        self.causes: list[Cause] = []

    def add(self, reason: str, field: str, message: str) -> None:
        self.causes.append(Cause(reason, field, message))

    def bad(self, field: str, value: JSON, why: str) -> None:
        self.add("FieldValueInvalid", field, "Invalid value: %s: %s" % (_q(value), why))

    def required(self, field: str) -> None:
        self.add("FieldValueRequired", field, "Required value")

    def unsupported(self, field: str, value: JSON, allowed: list[str]) -> None:
        self.add("FieldValueNotSupported", field, "Unsupported value: %s: supported values: %s"
                 % (_q(value), ", ".join('"%s"' % a for a in allowed)))

    def dns_label(self, field: str, value: JSON) -> None:
        if not isinstance(value, str) or not value:
            return self.required(field)
        if len(value) > 63:
            self.bad(field, value, "must be no more than 63 characters")
        if not re.fullmatch(DNS1123_LABEL, value):
            self.bad(field, value, LABEL_MSG)

    def dns_subdomain(self, field: str, value: str) -> None:
        if len(value) > 253:
            self.bad(field, value, "must be no more than 253 characters")
        if not re.fullmatch(DNS1123_SUBDOMAIN, value):
            self.bad(field, value, SUBDOMAIN_MSG)

    def qualified_name(self, field: str, key: str) -> None:
        prefix, sep, name = key.rpartition("/")
        if sep and not prefix:
            self.bad(field, key, "prefix part must be non-empty")
        elif sep:
            if len(prefix) > 253:
                self.bad(field, key, "prefix part must be no more than 253 characters")
            if not re.fullmatch(DNS1123_SUBDOMAIN, prefix):
                self.bad(field, key, "prefix part " + SUBDOMAIN_MSG)
        if not name:
            self.bad(field, key, "name part must be non-empty")
            return
        if len(name) > 63:
            self.bad(field, key, "name part must be no more than 63 characters")
        if not re.fullmatch(QNAME_RE, name):
            self.bad(field, key, QNAME_MSG)

    def labels(self, field: str, labels: JSON) -> None:
        if not isinstance(labels, dict):
            return
        for k, v in labels.items():
            self.qualified_name(field, k)
            v = "" if v is None else v
            if len(v) > 63:
                self.bad(field, v, "must be no more than 63 characters")
            if not re.fullmatch("(" + QNAME_RE + ")?", v):
                self.bad(field, v, LABELVAL_MSG)

    def annotations(self, field: str, ann: JSON) -> None:
        if not isinstance(ann, dict):
            return
        total = 0
        for k, v in ann.items():
            self.qualified_name(field, k.lower())
            total += len(k) + len(v or "")
        if total > 256 * 1024:
            self.add("FieldValueTooLong", field, "Too long: must have at most 262144 bytes")

    def metadata(self, meta: JSON, generate_ok: bool = True) -> None:
        meta = meta or {}
        name, gen = meta.get("name"), meta.get("generateName")
        if not name and not (generate_ok and gen):
            self.add("FieldValueRequired", "metadata.name",
                     "Required value: name or generateName is required")
        elif name:
            self.dns_subdomain("metadata.name", name)
        self.labels("metadata.labels", meta.get("labels"))
        self.annotations("metadata.annotations", meta.get("annotations"))

    def quantity_map(self, field: str, res: JSON) -> dict[str, Decimal]:
        out: dict[str, Decimal] = {}
        for k, v in (res or {}).items():
            f = "%s[%s]" % (field, k)
            if k not in ("cpu", "memory", "ephemeral-storage", "storage") and \
                    not k.startswith("hugepages-") and "/" not in k:
                self.bad(f, k, "must be a standard resource type or fully qualified")
            q = parse_quantity(v)  # decoding already proved it parses
            if q < 0:
                self.bad(f, v, "must be greater than or equal to 0")
            out[k] = q
        return out


def _fmt(q: JSON) -> str:
    return str(q)


def validate_pod(pod: dict[str, Any], secrets_exist: Callable[[str], bool]) -> None:
    """The API server's semantic validation of a Pod (ValidatePodCreate), the parts a
    provider can get wrong. Raises ApiError 422."""
    c = Checker()
    meta = pod.get("metadata") or {}
    c.metadata(meta)
    spec = pod.get("spec") or {}
    vols: dict[str, dict[str, Any]] = {}
    for i, v in enumerate(spec.get("volumes") or []):
        f = "spec.volumes[%d]" % i
        c.dns_label(f + ".name", v.get("name"))
        if v.get("name") in vols:
            c.add("FieldValueDuplicate", f + ".name", "Duplicate value: " + _q(v.get("name")))
        vols[v.get("name")] = v
        sources = [k for k in v if k != "name" and v[k] is not None]
        if not sources:
            c.add("FieldValueRequired", f, "Required value: must specify a volume type")
        elif len(sources) > 1:
            c.add("FieldValueForbidden", f + "." + sources[1],
                  "Forbidden: may not specify more than 1 volume type")
        pvc = v.get("persistentVolumeClaim")
        if pvc is not None and not pvc.get("claimName"):
            c.required(f + ".persistentVolumeClaim.claimName")
        sv = v.get("secret")
        if sv is not None:
            if not sv.get("secretName"):
                c.required(f + ".secret.secretName")
            dm = sv.get("defaultMode")
            if dm is not None and not 0 <= dm <= 0o777:
                c.bad(f + ".secret.defaultMode", dm,
                      "must be a number between 0 and 0777 (octal), both inclusive")
            for j, it in enumerate(sv.get("items") or []):
                itf = "%s.secret.items[%d]" % (f, j)
                if not it.get("key"):
                    c.required(itf + ".key")
                ip = it.get("path") or ""
                if not ip:
                    c.required(itf + ".path")
                elif ip.startswith("/"):
                    c.bad(itf + ".path", ip, "must be a relative path")
                elif ".." in ip.split("/"):
                    c.bad(itf + ".path", ip, "must not contain '..'")
        ed = v.get("emptyDir")
        if ed is not None and ed.get("medium") not in (None, "", "Memory") and \
                not str(ed.get("medium")).startswith("HugePages"):
            c.unsupported(f + ".emptyDir.medium", ed.get("medium"), ["", "Memory"])
    names: set[str] = set()
    containers = spec.get("containers") or []
    if not containers:
        c.required("spec.containers")
    for group in ("initContainers", "containers"):
        for i, ctr in enumerate(spec.get(group) or []):
            _validate_container(c, "spec.%s[%d]" % (group, i), ctr, vols, names)
    rp = spec.get("restartPolicy")
    if rp is not None and rp not in ("Always", "OnFailure", "Never"):
        c.unsupported("spec.restartPolicy", rp, ["Always", "OnFailure", "Never"])
    dp = spec.get("dnsPolicy")
    if dp is not None and dp not in ("ClusterFirstWithHostNet", "ClusterFirst", "Default",
                                     "None"):
        c.unsupported("spec.dnsPolicy", dp,
                      ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"])
    tg = spec.get("terminationGracePeriodSeconds")
    if tg is not None and tg < 0:
        c.bad("spec.terminationGracePeriodSeconds", tg, "must be greater than or equal to 0")
    ad = spec.get("activeDeadlineSeconds")
    if ad is not None and ad <= 0:
        c.bad("spec.activeDeadlineSeconds", ad, "must be between 1 and 2147483647, inclusive")
    c.labels("spec.nodeSelector", spec.get("nodeSelector"))
    for i, t in enumerate(spec.get("tolerations") or []):
        op = t.get("operator")
        if op not in (None, "", "Equal", "Exists"):
            c.unsupported("spec.tolerations[%d].operator" % i, op, ["Equal", "Exists"])
        if op == "Exists" and t.get("value"):
            c.bad("spec.tolerations[%d].operator" % i, t.get("value"),
                  "value must be empty when `operator` is 'Exists'")
        eff = t.get("effect")
        if eff not in (None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            c.unsupported("spec.tolerations[%d].effect" % i, eff,
                          ["NoExecute", "NoSchedule", "PreferNoSchedule"])
    for i, s in enumerate(spec.get("imagePullSecrets") or []):
        if not s.get("name"):
            c.required("spec.imagePullSecrets[%d].name" % i)
    if spec.get("serviceAccountName"):
        c.dns_subdomain("spec.serviceAccountName", spec["serviceAccountName"])
    if spec.get("runtimeClassName"):
        c.dns_subdomain("spec.runtimeClassName", spec["runtimeClassName"])
    if c.causes:
        raise invalid("Pod", meta.get("name") or meta.get("generateName") or "", c.causes)


def _validate_container(c: Checker, f: str, ctr: dict[str, Any],
                        vols: dict[str, dict[str, Any]], names: set[str]) -> None:
    c.dns_label(f + ".name", ctr.get("name"))
    if ctr.get("name") in names:
        c.add("FieldValueDuplicate", f + ".name", "Duplicate value: " + _q(ctr.get("name")))
    names.add(ctr.get("name"))
    if not ctr.get("image"):
        c.required(f + ".image")
    elif ctr["image"] != ctr["image"].strip():
        c.bad(f + ".image", ctr["image"], "must not have leading or trailing whitespace")
    pp = ctr.get("imagePullPolicy")
    if pp is not None and pp not in ("Always", "IfNotPresent", "Never"):
        c.unsupported(f + ".imagePullPolicy", pp, ["Always", "IfNotPresent", "Never"])
    ports_seen: set[tuple[int, str]] = set()
    for j, p in enumerate(ctr.get("ports") or []):
        pf = "%s.ports[%d]" % (f, j)
        cp = p.get("containerPort")
        if cp is None:
            c.required(pf + ".containerPort")
        elif not 1 <= cp <= 65535:
            c.bad(pf + ".containerPort", cp, "must be between 1 and 65535, inclusive")
        hp = p.get("hostPort")
        if hp is not None and hp != 0 and not 1 <= hp <= 65535:
            c.bad(pf + ".hostPort", hp, "must be between 1 and 65535, inclusive")
        proto = p.get("protocol") or "TCP"
        if proto not in ("TCP", "UDP", "SCTP"):
            c.unsupported(pf + ".protocol", proto, ["SCTP", "TCP", "UDP"])
        if p.get("name"):
            n = p["name"]
            if len(n) > 15:
                c.bad(pf + ".name", n, "must be no more than 15 characters")
            if not re.fullmatch(r"[-a-z0-9]*[a-z][-a-z0-9]*", n) or "--" in n or \
                    n.startswith("-") or n.endswith("-"):
                c.bad(pf + ".name", n, "must contain only alpha-numeric characters (a-z, 0-9), "
                      "and hyphens (-)")
        if cp is not None and (cp, proto) in ports_seen:
            c.add("FieldValueDuplicate", pf, "Duplicate value: " + _q("%d/%s" % (cp, proto)))
        ports_seen.add((cp, proto))
    envs: set[str] = set()
    for j, e in enumerate(ctr.get("env") or []):
        ef = "%s.env[%d]" % (f, j)
        n = e.get("name")
        if not n:
            c.required(ef + ".name")
        elif not re.fullmatch(ENV_RE, n):
            c.bad(ef + ".name", n, ENV_MSG)
        envs.add(n)
        vf = e.get("valueFrom")
        if vf is not None:
            srcs = [k for k in vf if vf[k] is not None]
            if e.get("value"):
                c.add("FieldValueInvalid", ef + ".valueFrom", "Invalid value: \"\": may not be "
                      "specified when `value` is not empty")
            if len(srcs) != 1:
                c.add("FieldValueInvalid", ef + ".valueFrom", "Invalid value: \"\": may not "
                      "have more than one field specified at a time" if srcs else
                      "Required value: must specify one of: `fieldRef`, `resourceFieldRef`, "
                      "`configMapKeyRef` or `secretKeyRef`")
            sk = vf.get("secretKeyRef")
            if sk is not None:
                if not sk.get("key"):
                    c.required(ef + ".valueFrom.secretKeyRef.key")
                if not sk.get("name"):
                    c.required(ef + ".valueFrom.secretKeyRef.name")
    mounts: set[str] = set()
    for j, m in enumerate(ctr.get("volumeMounts") or []):
        mf = "%s.volumeMounts[%d]" % (f, j)
        if not m.get("name"):
            c.required(mf + ".name")
        elif m["name"] not in vols:
            c.add("FieldValueNotFound", mf + ".name", "Not found: " + _q(m["name"]))
        mp = m.get("mountPath")
        if not mp:
            c.required(mf + ".mountPath")
        elif mp in mounts:
            c.bad(mf + ".mountPath", mp, "must be unique")
        mounts.add(mp)
        sp = m.get("subPath") or ""
        if sp.startswith("/") or ".." in sp.split("/"):
            c.bad(mf + ".subPath", sp, "must be a relative path without '..'")
    res = ctr.get("resources") or {}
    lim = c.quantity_map(f + ".resources.limits", res.get("limits"))
    req = c.quantity_map(f + ".resources.requests", res.get("requests"))
    for k, q in req.items():
        if k in lim and q > lim[k]:
            c.bad("%s.resources.requests" % f, (res.get("requests") or {})[k],
                  "must be less than or equal to %s limit of %s"
                  % (k, _fmt((res.get("limits") or {})[k])))
    wd = ctr.get("workingDir")
    if wd is not None and wd and not wd.startswith("/"):
        pass  # the API server accepts relative working dirs; the runtime resolves them


def validate_pvc(pvc: dict[str, Any]) -> None:
    """ValidatePersistentVolumeClaim, the parts a client sets."""
    c = Checker()
    meta = pvc.get("metadata") or {}
    c.metadata(meta)
    spec = pvc.get("spec") or {}
    modes = spec.get("accessModes") or []
    if not modes:
        c.add("FieldValueRequired", "spec.accessModes",
              "Required value: at least 1 access mode is required")
    allowed = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
    for m in modes:
        if m not in allowed:
            c.unsupported("spec.accessModes", m, allowed)
    req = ((spec.get("resources") or {}).get("requests") or {})
    if "storage" not in req:
        c.add("FieldValueRequired", "spec.resources[storage]", "Required value")
    else:
        q = parse_quantity(req["storage"])
        if q <= 0:
            c.bad("spec.resources[storage]", req["storage"], "must be greater than zero")
    vm = spec.get("volumeMode")
    if vm is not None and vm not in ("Block", "Filesystem"):
        c.unsupported("spec.volumeMode", vm, ["Block", "Filesystem"])
    if c.causes:
        raise invalid("PersistentVolumeClaim", meta.get("name") or "", c.causes)


def validate_secret(sec: dict[str, Any]) -> None:
    """ValidateSecret: name and data keys."""
    c = Checker()
    meta = sec.get("metadata") or {}
    c.metadata(meta)
    for k in list((sec.get("data") or {})) + list((sec.get("stringData") or {})):
        if not re.fullmatch(r"[-._a-zA-Z0-9]+", k):
            c.bad("data[%s]" % k, k, "a valid config key must consist of alphanumeric "
                  "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or "
                  "'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
    if c.causes:
        raise invalid("Secret", meta.get("name") or "", c.causes)
