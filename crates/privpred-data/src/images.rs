//! Image-folder reader: `<split>/<class>/*.{jpg,jpeg,png}`, from a directory or directly from
//! a `.tar` / `.tar.gz` archive (e.g. `shared/data/cifar10-jpeg.tar.gz`). Files are read
//! sequentially and decoded in parallel (rayon). Class indices are the sorted class-folder
//! names of the training split (for CIFAR-10 that is the canonical label order). Features
//! are channel-major (C × H × W, like the CIFAR-10 binary format), values 0..255.

use crate::error::{DataError, Result};
use crate::limits::{
    MAX_IMAGE_FILE_BYTES, MAX_IMAGE_SET_BYTES, MAX_IMAGE_SET_VALUES, MAX_IMAGE_SIDE,
};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One split of an image folder, decoded.
#[derive(Debug, Clone)]
pub struct ImageSplit {
    /// Channel-major features, `n * c * h * w` values 0..255.
    pub features: Vec<f32>,
    /// Labels (indices into the class names).
    pub labels: Vec<u32>,
}

/// A decoded image folder.
#[derive(Debug, Clone)]
pub struct ImageFolder {
    /// Class names (label i = `classes[i]`): the class folders sorted, or the names the
    /// caller declares (`LoadOptions::class_names`).
    pub classes: Vec<String>,
    /// Shape `[channels, height, width]`.
    pub shape: [usize; 3],
    /// Splits by name (`train`, `test`).
    pub splits: BTreeMap<String, ImageSplit>,
}

struct Entry {
    split: String,
    class: String,
    name: String,
    bytes: Vec<u8>,
}

fn is_image(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    l.ends_with(".jpg") || l.ends_with(".jpeg") || l.ends_with(".png")
}

const SPLITS: [&str; 2] = ["train", "test"];

/// Splits a relative path into (split, class, file) if it matches `…/<split>/<class>/<file>`.
fn classify(components: &[String]) -> Option<(String, String, String)> {
    let k = components.len();
    if k < 3 {
        return None;
    }
    let (split, class, file) = (&components[k - 3], &components[k - 2], &components[k - 1]);
    if !SPLITS.contains(&split.as_str()) || !is_image(file) || file.starts_with('.') {
        return None;
    }
    Some((split.clone(), class.clone(), file.clone()))
}

fn read_tar(path: &Path) -> Result<Vec<Entry>> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let reader = crate::idx::open_maybe_gz(path)?;
    let mut ar = tar::Archive::new(reader);
    let mut out = Vec::new();
    let mut total = 0u64;
    for e in ar.entries().map_err(io)? {
        let mut e = e.map_err(|source| DataError::Format {
            path: path.to_path_buf(),
            reason: format!("corrupt tar archive: {source}"),
        })?;
        if !e.header().entry_type().is_file() {
            continue;
        }
        let p = e.path().map_err(io)?.into_owned();
        let comps: Vec<String> = p
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if let Some((split, class, _file)) = classify(&comps) {
            // The entry header's size is not trusted for an allocation: it is checked against
            // the limits, and the bytes are read as they come (at most the limit + 1).
            let size = e.size();
            if size > MAX_IMAGE_FILE_BYTES {
                return Err(DataError::Format {
                    path: path.to_path_buf(),
                    reason: format!(
                        "tar entry {} claims {size} bytes, more than the limit of {MAX_IMAGE_FILE_BYTES} bytes per image (privpred_data::limits::MAX_IMAGE_FILE_BYTES)",
                        p.display()
                    ),
                });
            }
            total = total.saturating_add(size);
            if total > MAX_IMAGE_SET_BYTES {
                return Err(DataError::Format {
                    path: path.to_path_buf(),
                    reason: format!(
                        "the image files add up to more than the limit of {MAX_IMAGE_SET_BYTES} bytes (privpred_data::limits::MAX_IMAGE_SET_BYTES)"
                    ),
                });
            }
            let mut bytes = Vec::with_capacity(size.min(1 << 20) as usize);
            (&mut e)
                .take(size)
                .read_to_end(&mut bytes)
                .map_err(|source| DataError::Format {
                    path: path.to_path_buf(),
                    reason: format!("corrupt tar archive at {}: {source}", p.display()),
                })?;
            if (bytes.len() as u64) != size {
                return Err(DataError::Format {
                    path: path.to_path_buf(),
                    reason: format!(
                        "truncated tar archive: entry {} claims {size} bytes, {} present",
                        p.display(),
                        bytes.len()
                    ),
                });
            }
            out.push(Entry {
                split,
                class,
                name: format!("{}!{}", path.display(), p.display()),
                bytes,
            });
        }
    }
    Ok(out)
}

fn read_dir_tree(root: &Path) -> Result<Vec<Entry>> {
    let io = |p: &Path, source| DataError::Io {
        path: p.to_path_buf(),
        source,
    };
    let mut files: Vec<(String, String, PathBuf)> = Vec::new();
    let mut total = 0u64;
    for split in SPLITS {
        let sd = root.join(split);
        if !sd.is_dir() {
            continue;
        }
        for c in std::fs::read_dir(&sd).map_err(|e| io(&sd, e))? {
            let c = c.map_err(|e| io(&sd, e))?;
            if !c.path().is_dir() {
                continue;
            }
            let class = c.file_name().to_string_lossy().into_owned();
            for f in std::fs::read_dir(c.path()).map_err(|e| io(&c.path(), e))? {
                let f = f.map_err(|e| io(&c.path(), e))?;
                let name = f.file_name().to_string_lossy().into_owned();
                if is_image(&name) && !name.starts_with('.') && f.path().is_file() {
                    let len = f.metadata().map_err(|e| io(&f.path(), e))?.len();
                    if len > MAX_IMAGE_FILE_BYTES {
                        return Err(DataError::Format {
                            path: f.path(),
                            reason: format!(
                                "{len} bytes, more than the limit of {MAX_IMAGE_FILE_BYTES} bytes per image (privpred_data::limits::MAX_IMAGE_FILE_BYTES)"
                            ),
                        });
                    }
                    total = total.saturating_add(len);
                    if total > MAX_IMAGE_SET_BYTES {
                        return Err(DataError::Format {
                            path: root.to_path_buf(),
                            reason: format!(
                                "the image files add up to more than the limit of {MAX_IMAGE_SET_BYTES} bytes (privpred_data::limits::MAX_IMAGE_SET_BYTES)"
                            ),
                        });
                    }
                    files.push((split.to_string(), class.clone(), f.path()));
                }
            }
        }
    }
    files
        .into_par_iter()
        .map(|(split, class, p)| {
            let bytes = std::fs::read(&p).map_err(|e| io(&p, e))?;
            Ok(Entry {
                split,
                class,
                name: p.display().to_string(),
                bytes,
            })
        })
        .collect()
}

impl ImageFolder {
    /// Relabels an image folder by the declared class names (label i = `names[i]`): a class
    /// folder outside them is an error naming it; a declared name without a folder is a class
    /// without images.
    pub(crate) fn declare_class_names(&mut self, names: &[String], path: &Path) -> Result<()> {
        let mut map = Vec::with_capacity(self.classes.len());
        for c in &self.classes {
            match names.iter().position(|n| n == c) {
                Some(i) => map.push(i as u32),
                None => {
                    return Err(DataError::Format {
                        path: path.to_path_buf(),
                        reason: format!(
                            "class folder `{c}` is not one of the declared classes ({})",
                            names.join(", ")
                        ),
                    });
                }
            }
        }
        for s in self.splits.values_mut() {
            for y in &mut s.labels {
                *y = map[*y as usize];
            }
        }
        self.classes = names.to_vec();
        Ok(())
    }
}

/// Reads an image folder from a directory or a `.tar[.gz]` archive.
pub fn read_image_folder(path: &Path) -> Result<ImageFolder> {
    let mut entries = if path.is_dir() {
        read_dir_tree(path)?
    } else if path.is_file() {
        read_tar(path)?
    } else {
        return Err(DataError::NotFound(format!(
            "{}: no such image folder or archive",
            path.display()
        )));
    };
    if entries.is_empty() {
        return Err(DataError::Format {
            path: path.to_path_buf(),
            reason: "no images in the layout <split>/<class>/*.jpg|png (split = train or test)"
                .into(),
        });
    }
    entries.sort_by(|a, b| (&a.split, &a.class, &a.name).cmp(&(&b.split, &b.class, &b.name)));
    let classes: Vec<String> = {
        let mut c: Vec<String> = entries
            .iter()
            .filter(|e| e.split == "train")
            .map(|e| e.class.clone())
            .collect();
        if c.is_empty() {
            c = entries.iter().map(|e| e.class.clone()).collect();
        }
        c.sort();
        c.dedup();
        c
    };
    if let Some(e) = entries
        .iter()
        .find(|e| classes.binary_search(&e.class).is_err())
    {
        return Err(DataError::Format {
            path: path.to_path_buf(),
            reason: format!(
                "class folder `{}` of split `{}` does not exist in the training split",
                e.class, e.split
            ),
        });
    }
    // Decode the first image to fix the shape.
    let first = decode(&entries[0])?;
    let shape = [first.0, first.1, first.2];
    let per = shape[0] * shape[1] * shape[2];
    if (per as u64).saturating_mul(entries.len() as u64) > MAX_IMAGE_SET_VALUES {
        return Err(DataError::Format {
            path: path.to_path_buf(),
            reason: format!(
                "{} images of {}×{}×{} values exceed the limit of {MAX_IMAGE_SET_VALUES} values (privpred_data::limits::MAX_IMAGE_SET_VALUES)",
                entries.len(),
                shape[0],
                shape[1],
                shape[2]
            ),
        });
    }
    let decoded: Vec<Vec<f32>> = entries
        .par_iter()
        .map(|e| {
            let (c, h, w, px) = decode(e)?;
            if [c, h, w] != shape {
                return Err(DataError::Format {
                    path: PathBuf::from(&e.name),
                    reason: format!(
                        "image is {c}×{h}×{w}, expected {}×{}×{} like the first image",
                        shape[0], shape[1], shape[2]
                    ),
                });
            }
            Ok(px)
        })
        .collect::<Result<_>>()?;
    let mut splits: BTreeMap<String, ImageSplit> = BTreeMap::new();
    for (e, px) in entries.iter().zip(decoded) {
        let s = splits.entry(e.split.clone()).or_insert_with(|| ImageSplit {
            features: Vec::new(),
            labels: Vec::new(),
        });
        if s.features.capacity() == 0 {
            s.features
                .reserve(per * entries.iter().filter(|x| x.split == e.split).count());
        }
        s.features.extend_from_slice(&px);
        s.labels
            .push(classes.binary_search(&e.class).unwrap_or(0) as u32);
    }
    Ok(ImageFolder {
        classes,
        shape,
        splits,
    })
}

/// Decodes one image to channel-major f32 (grayscale images keep one channel).
fn decode(e: &Entry) -> Result<(usize, usize, usize, Vec<f32>)> {
    let unreadable = |err: &dyn std::fmt::Display| DataError::Format {
        path: PathBuf::from(&e.name),
        reason: format!("unreadable image: {err}"),
    };
    // The decoder refuses an image header claiming more than MAX_IMAGE_SIDE pixels a side
    // before allocating its buffer.
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_IMAGE_SIDE);
    limits.max_image_height = Some(MAX_IMAGE_SIDE);
    limits.max_alloc = Some(4 * 4 * u64::from(MAX_IMAGE_SIDE) * u64::from(MAX_IMAGE_SIDE));
    let mut reader = image::ImageReader::new(std::io::Cursor::new(&e.bytes))
        .with_guessed_format()
        .map_err(|err| unreadable(&err))?;
    reader.limits(limits);
    let img = reader.decode().map_err(|err| unreadable(&err))?;
    let gray = matches!(
        img.color(),
        image::ColorType::L8
            | image::ColorType::L16
            | image::ColorType::La8
            | image::ColorType::La16
    );
    let (w, h) = (img.width() as usize, img.height() as usize);
    if gray {
        let g = img.to_luma8();
        Ok((1, h, w, g.as_raw().iter().map(|&v| v as f32).collect()))
    } else {
        let rgb = img.to_rgb8();
        let raw = rgb.as_raw();
        let mut out = vec![0f32; 3 * h * w];
        for (i, px) in raw.chunks_exact(3).enumerate() {
            out[i] = px[0] as f32;
            out[h * w + i] = px[1] as f32;
            out[2 * h * w + i] = px[2] as f32;
        }
        Ok((3, h, w, out))
    }
}
