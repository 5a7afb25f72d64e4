//! `define_events!`: the event table (in `event.rs`) turned into the
//! `Event` enum, both encodings and the handler trait.
//!
//! One row per event:
//!
//! ```text
//! /// doc
//! Variant = TAG, verb(pid) { field: Type as Codec, ... },
//! ```
//!
//! `TAG` is the binary record tag, `verb` the text verb and the name of the
//! [`EventHandler`](crate::EventHandler) method, `(pid)` marks events of a
//! process (written `PID verb ...` in text) and `()` events of none
//! (`tick`). Each field names its Rust type and the [`Codec`](crate::codec::Codec)
//! that writes and reads it in both encodings, in the row's order. From
//! the table the macro generates:
//! - `enum Event` with one variant per row, and `Event::pid`, `Event::verb`;
//! - `EVENT_KINDS`: each event's verb, tag and text usage;
//! - the text codec: `Event::from_text` (verb, pid and argument tokens)
//!   and `Event::write_text`;
//! - the binary codec: `Event::encode` and `Event::decode`;
//! - `trait EventHandler` (one method per event, its fields as arguments)
//!   and `Event::dispatch`, through which the model replay and the native
//!   host runner apply events;
//! - under `cfg(test)`, `Event::strategy()` for the round-trip property
//!   test.
//!
//! Adding an event is one row here plus its semantics: the compiler then
//! asks every `EventHandler` for the new method.

/// Random pids, for the property tests (the argument only selects the
/// events that have one).
#[cfg(test)]
macro_rules! pid_strategy {
    ($pid:ident) => {
        1u32..70000
    };
}

/// `Some(pid)` for an event of a process, `None` for `tick`.
macro_rules! event_pid {
    () => {
        None
    };
    ($pid:ident) => {
        Some($pid)
    };
}

macro_rules! define_events {
    (
        $(
            $(#[$doc:meta])*
            $variant:ident = $tag:literal, $verb:ident ( $($pid:ident)? ) {
                $( $(#[$fdoc:meta])* $field:ident : $ty:ty as $codec:ty ),* $(,)?
            }
        ),* $(,)?
    ) => {
        /// One event. Addresses and lengths are bytes; `mmap`, `mremap`
        /// and `brk` carry the kernel's result.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Event {
            $(
                $(#[$doc])*
                $variant {
                    $( $pid: $crate::event::TracePid, )?
                    $( $(#[$fdoc])* $field: $ty, )*
                },
            )*
        }

        /// Every event's verb, binary tag and text arguments.
        pub const EVENT_KINDS: &[$crate::event::EventKind] = &[
            $(
                $crate::event::EventKind {
                    verb: stringify!($verb),
                    tag: $tag,
                    has_pid: {
                        let p: &[&str] = &[$(stringify!($pid)),*];
                        !p.is_empty()
                    },
                    args: &[ $( <$codec as $crate::codec::Codec<$ty>>::USAGE ),* ],
                },
            )*
        ];

        impl Event {
            /// The process the event belongs to (`None` for ticks).
            pub fn pid(&self) -> Option<$crate::event::TracePid> {
                match *self {
                    $( Event::$variant { $($pid,)? .. } => $crate::macros::event_pid!($($pid)?), )*
                }
            }

            /// The text verb (also the [`EventHandler`] method).
            pub fn verb(&self) -> &'static str {
                match self {
                    $( Event::$variant { .. } => stringify!($verb), )*
                }
            }

            /// The event of text verb `verb` with `pid` (the token before
            /// the verb, if any) and argument tokens `args`.
            pub fn from_text(
                verb: &str,
                pid: Option<$crate::event::TracePid>,
                args: &[&str],
            ) -> Result<Event, $crate::error::RecordError> {
                use $crate::codec::Codec;
                use $crate::error::RecordError;
                match verb {
                    $(
                        stringify!($verb) => {
                            const ARGS: &[&str] = &[ $( <$codec as Codec<$ty>>::USAGE ),* ];
                            const HAS_PID: bool = {
                                let p: &[&str] = &[$(stringify!($pid)),*];
                                !p.is_empty()
                            };
                            let verb = stringify!($verb);
                            if HAS_PID != pid.is_some() {
                                return Err(if HAS_PID { RecordError::NeedsPid(verb) } else { RecordError::TakesNoPid(verb) });
                            }
                            $( let $pid = pid.expect("checked above"); )?
                            if args.len() != ARGS.len() {
                                return Err(RecordError::Arity { verb, usage: ARGS.join(" ") });
                            }
                            #[allow(unused_mut, unused_variables)]
                            let mut it = args.iter();
                            $(
                                let $field = <$codec as Codec<$ty>>::parse(it.next().expect("arity checked"))?;
                            )*
                            Ok(Event::$variant { $($pid,)? $($field,)* })
                        }
                    )*
                    other => Err(RecordError::UnknownEvent(other.to_string())),
                }
            }

            /// Appends the event's text line (without newline) to `out`.
            pub fn write_text(&self, out: &mut String) {
                use $crate::codec::Codec;
                use std::fmt::Write as _;
                match *self {
                    $(
                        Event::$variant { $($pid,)? $($field,)* } => {
                            $( let _ = write!(out, "{} ", $pid); )?
                            out.push_str(stringify!($verb));
                            $(
                                out.push(' ');
                                <$codec as Codec<$ty>>::write($field, out);
                            )*
                        }
                    )*
                }
            }

            /// Appends the event's binary record to `enc`.
            pub fn encode(&self, enc: &mut $crate::codec::Encoder) {
                use $crate::codec::Codec;
                match *self {
                    $(
                        Event::$variant { $($pid,)? $($field,)* } => {
                            enc.put_byte($tag);
                            $( enc.put_pid($pid); )?
                            $( <$codec as Codec<$ty>>::encode($field, enc); )*
                        }
                    )*
                }
            }

            /// The event of binary record tag `tag`, its fields read from `dec`.
            pub fn decode<R: std::io::Read>(
                tag: u8,
                dec: &mut $crate::codec::Decoder<R>,
            ) -> Result<Event, $crate::error::TraceError> {
                use $crate::codec::Codec;
                match tag {
                    $(
                        $tag => Ok(Event::$variant {
                            $( $pid: dec.pid()?, )?
                            $( $field: <$codec as Codec<$ty>>::decode(dec)?, )*
                        }),
                    )*
                    other => Err(dec.bad($crate::error::RecordError::UnknownTag(other))),
                }
            }

            /// Applies the event through the handler's method for it.
            pub fn dispatch<H: EventHandler + ?Sized>(&self, handler: &mut H) -> Result<(), H::Error> {
                match *self {
                    $(
                        Event::$variant { $($pid,)? $($field,)* } => {
                            EventHandler::$verb(handler, $($pid,)? $($field),*)
                        }
                    )*
                }
            }

            /// Random events of every kind, for property tests.
            #[cfg(test)]
            pub fn strategy() -> proptest::strategy::BoxedStrategy<Event> {
                use proptest::prelude::*;
                use $crate::codec::Codec;
                prop_oneof![
                    $(
                        (
                            $( $crate::macros::pid_strategy!($pid), )?
                            $( <$codec as Codec<$ty>>::strategy(), )*
                        ).prop_map(|($($pid,)? $($field,)*)| Event::$variant { $($pid,)? $($field,)* })
                    ),*
                ]
                .boxed()
            }
        }

        /// What applies events: the model replay and the native host
        /// runner. One method per event with its fields; a new event in the
        /// table is a new method every handler must give semantics to.
        #[allow(clippy::too_many_arguments)]
        pub trait EventHandler {
            type Error;
            $(
                $(#[$doc])*
                fn $verb(&mut self, $($pid: $crate::event::TracePid,)? $($field: $ty),*) -> Result<(), Self::Error>;
            )*
        }
    };
}

pub(crate) use define_events;
pub(crate) use event_pid;
#[cfg(test)]
pub(crate) use pid_strategy;
